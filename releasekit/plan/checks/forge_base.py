"""Every planned PR targets the component's canonical branch on the forge
(seed 003: "target dev/fathomless-firmament directly"); ``forge.base_branch`` may name another."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck, ForgeItem


class PlannedPRsTargetCanonical(ForgeCheck):
    name = "planned-prs-target-canonical"
    codes = ("PLANNED_PR_WRONG_BASE", NOT_RUN)
    roles = frozenset({"planned"})

    def judge_pr(self, item: ForgeItem, findings: Findings) -> None:
        want = item.forge.base_branch or item.state.branch
        if item.pr.base_ref != want:
            findings.add(
                "PLANNED_PR_WRONG_BASE",
                f"planned PR #{item.pr.number} targets {item.pr.base_ref or '?'} on the forge, not {want}",
                component=item.component,
                pr=item.pr.number,
            )
