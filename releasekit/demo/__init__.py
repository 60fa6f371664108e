"""releasekit.demo"""
