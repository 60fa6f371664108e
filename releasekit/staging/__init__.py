"""Stage 4b: the verified candidate travels by digest.

``releasekit stage`` (build host, after verify-provenance) pushes the candidate to a staging
repository and records its registry digest (``staging.json``); ``candidate.py`` is how a GPU
host's ``validate`` / ``test`` pull that digest and prove the pulled image is the verified one.
"""
