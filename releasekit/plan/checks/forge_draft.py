"""No planned PR is a draft on the forge (seed 003: "All PRs below are non-draft")."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext
from releasekit.plan.checks.forge_scope import NOT_RUN, forge_scope


class PlannedPRsNotDraft:
    name = "planned-prs-not-draft"
    codes = ("PLANNED_PR_IS_DRAFT", NOT_RUN)

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        scope = forge_scope(ctx, self.name, {"planned"})
        for skip in scope.not_run:
            findings.add(NOT_RUN, skip.message, severity=skip.severity, component=skip.component)
        for item in scope.items:
            if item.pr.draft:
                findings.add(
                    "PLANNED_PR_IS_DRAFT",
                    f"planned PR #{item.pr.number} is a draft on {item.forge.repo} ({item.pr.state})",
                    component=item.component,
                    pr=item.pr.number,
                )
        return findings
