"""Every PR the manifest calls already canonical is merged on the forge."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck, ForgeItem


class CanonicalPRsMergedOnForge(ForgeCheck):
    name = "canonical-prs-merged-on-forge"
    codes = ("CANONICAL_PR_NOT_MERGED_ON_FORGE", NOT_RUN)
    roles = frozenset({"already_canonical"})

    def judge_pr(self, item: ForgeItem, findings: Findings) -> None:
        if item.pr.state != "merged":
            findings.add(
                "CANONICAL_PR_NOT_MERGED_ON_FORGE",
                f"already-canonical PR #{item.pr.number} is {item.pr.state} on the forge, not merged",
                component=item.component,
                pr=item.pr.number,
            )
