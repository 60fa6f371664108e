"""releasekit.provenance"""
