"""No planned PR is a draft on the forge (seed 003: "All PRs below are non-draft")."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck, ForgeItem


class PlannedPRsNotDraft(ForgeCheck):
    name = "planned-prs-not-draft"
    codes = ("PLANNED_PR_IS_DRAFT", NOT_RUN)
    roles = frozenset({"planned"})

    def judge_pr(self, item: ForgeItem, findings: Findings) -> None:
        if item.pr.draft:
            findings.add(
                "PLANNED_PR_IS_DRAFT",
                f"planned PR #{item.pr.number} is a draft on {item.forge.repo} ({item.pr.state})",
                component=item.component,
                pr=item.pr.number,
            )
