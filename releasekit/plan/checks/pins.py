"""Release inputs (requirements, Dockerfiles, CI files) name the manifest's pinned versions (``--pins``)."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class PinsAgree:
    name = "pins-agree"
    codes = ("VCS_DEPENDENCY", "PIN_UNPINNED", "PIN_MISMATCH", "PIN_NOT_FOUND")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        if ctx.pins is not None:
            findings.extend(f.model_copy(deep=True) for f in ctx.pins.findings)
        return findings
