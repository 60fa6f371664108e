"""Commits on a release branch that the checked canonical commit does not have (``release_refs``, ``--release``)."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class ReleaseOnlyCommits:
    name = "release-only-commits"
    codes = (
        "RELEASE_ONLY_CARRIED",
        "RELEASE_ONLY_COMMIT",
        "RELEASE_REF_MISSING",
        "RELEASE_UPSTREAM_BASE",
        "RELEASE_UPSTREAM_UNREAD",
    )

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for component, ref in ctx.release_missing:
            findings.add(
                "RELEASE_REF_MISSING",
                f"release ref {ref!r} named in the manifest's release_refs is not in {ctx.components[component].mirror.url}",
                component=component,
            )
        for _, report in ctx.release_only:
            findings.extend(f.model_copy(deep=True) for f in report.findings)
        return findings
