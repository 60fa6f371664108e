"""releasekit.builder"""
