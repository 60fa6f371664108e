"""The release-only audit's report (``audit release-only --json``), embedded in ``plan-check.json``.

Its own module so that ``audit release-only``, whose start-up is timed against ``git
cherry``, builds only these models; ``releasekit.records.plan_check`` re-exports them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from releasekit.findings import Findings
from releasekit.records.base import Strict


class ReleaseOnlyCommit(Strict):
    commit: str
    subject: str
    kind: Literal["commit", "merge-resolution"] = "commit"
    carried_by: int | None = None  # the merged PR whose `carries:` names it


class UpstreamEntry(Strict):
    """A release-side commit through which upstream commits came in."""

    commit: str
    subject: str
    via: Literal["merge", "base"]  # merged in as a side parent / the branch was started on it
    upstream_commit: str  # its parent that upstream holds
    commits: int  # upstream commits canonical lacks that came in here and through no earlier entry


class UpstreamOrigin(Strict):
    """Release-side commits reachable from the component's upstream: reported once, not one by one."""

    repo: str  # the upstream repository, or "(--upstream)" when given as a revision
    ref: str
    commit: str  # the upstream commit the audit used
    canonical_base: str | None  # merge-base of canonical and upstream (canonical's upstream base)
    commits: int  # release-side commits (not on canonical) that upstream holds
    brought_by: list[UpstreamEntry] = Field(default_factory=list)  # oldest first


class ReleaseOnlyReport(Strict):
    repo: str
    release: str
    canonical: str
    release_commit: str
    canonical_commit: str
    examined: int  # commits on the release side not reachable from canonical
    equivalent: int  # of those, how many have a patch-equivalent on canonical
    release_only: list[ReleaseOnlyCommit] = Field(default_factory=list)  # fork-only, oldest first
    upstream: UpstreamOrigin | None = None  # with an upstream: the commits that came from it
    passed: bool
    findings: Findings = Field(default_factory=Findings)
