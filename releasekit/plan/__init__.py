"""releasekit.plan"""
