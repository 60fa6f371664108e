"""Commits on a release branch that the checked canonical commit does not have (``--release``)."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class ReleaseOnlyCommits:
    name = "release-only-commits"
    codes = ("RELEASE_ONLY_CARRIED", "RELEASE_ONLY_COMMIT")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for _, report in ctx.release_only:
            findings.extend(f.model_copy(deep=True) for f in report.findings)
        return findings
