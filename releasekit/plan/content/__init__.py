"""Content rules: overlays, fixed-commit fetches, patches and deployment files, recognised in a
commit's tree by what each file does (one recogniser module per rule, ``recognisers/``)."""

from releasekit.plan.content.interface import Hit
from releasekit.plan.content.scan import ContentScan, scan_commit

__all__ = ["ContentScan", "Hit", "scan_commit"]
