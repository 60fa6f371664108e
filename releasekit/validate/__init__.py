"""releasekit.validate"""
