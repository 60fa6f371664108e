"""releasekit.git: mirror cache, fresh checkouts, ancestry and patch-id."""
