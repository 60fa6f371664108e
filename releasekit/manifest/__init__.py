"""releasekit.manifest"""
