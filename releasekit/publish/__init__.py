"""releasekit.publish"""
