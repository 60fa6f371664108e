"""A git component whose repository or refs could not be read is a finding, not the end of the run."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class ComponentsReadable:
    name = "components-readable"
    codes = ("COMPONENT_UNREADABLE",)

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, reason in sorted(ctx.unreadable.items()):
            findings.add(
                "COMPONENT_UNREADABLE",
                f"not checked: {reason}",
                component=name,
            )
        return findings
