"""reproduce: rebuild a published image from the source archive attached to its digest, and compare.

A stage after publish: it reads what publish attached (or a local release directory) and may
use every earlier stage (the build itself is ``releasekit.builder``). See ``service.py``.
"""
