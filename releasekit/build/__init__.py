"""releasekit.build"""
