"""Release inputs (requirements, Dockerfiles, CI files) of the checked commits name the manifest's pinned versions."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class PinsAgree:
    name = "pins-agree"
    codes = (
        "VCS_DEPENDENCY",
        "PIN_UNPINNED",
        "PIN_MISMATCH",
        "PIN_NOT_FOUND",
        "PIN_INPUT_UNREADABLE",
        "PINS_NOTHING_SCANNED",
    )

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for audit in ctx.pins:
            findings.extend(f.model_copy(deep=True) for f in audit.findings)
        return findings
