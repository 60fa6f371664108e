"""Every PR the manifest calls already canonical is merged on the forge."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext
from releasekit.plan.checks.forge_scope import NOT_RUN, forge_scope


class CanonicalPRsMergedOnForge:
    name = "canonical-prs-merged-on-forge"
    codes = ("CANONICAL_PR_NOT_MERGED_ON_FORGE", NOT_RUN)

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        scope = forge_scope(ctx, self.name, {"already_canonical"})
        for skip in scope.not_run:
            findings.add(NOT_RUN, skip.message, severity=skip.severity, component=skip.component)
        for item in scope.items:
            if item.pr.state != "merged":
                findings.add(
                    "CANONICAL_PR_NOT_MERGED_ON_FORGE",
                    f"already-canonical PR #{item.pr.number} is {item.pr.state} on the forge, not merged",
                    component=item.component,
                    pr=item.pr.number,
                )
        return findings
