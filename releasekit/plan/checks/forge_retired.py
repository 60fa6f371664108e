"""Superseded and closed PRs are closed on the forge, and not merged there.

An open superseded PR can be merged by anyone tomorrow (seed 003: "#109 supersedes and
closes #105, #106, and #107"; "#88 ... remains closed"; "closed #96 is superseded").
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck, ForgeItem

OPEN = {"closed": "CLOSED_PR_OPEN", "superseded": "SUPERSEDED_PR_OPEN"}
MERGED = {"closed": "CLOSED_PR_MERGED_ON_FORGE", "superseded": "SUPERSEDED_PR_MERGED_ON_FORGE"}


class RetiredPRsClosedOnForge(ForgeCheck):
    name = "retired-prs-closed-on-forge"
    codes = (
        "SUPERSEDED_PR_OPEN",
        "CLOSED_PR_OPEN",
        "SUPERSEDED_PR_MERGED_ON_FORGE",
        "CLOSED_PR_MERGED_ON_FORGE",
        NOT_RUN,
    )
    roles = frozenset({"superseded", "closed"})

    def judge_pr(self, item: ForgeItem, findings: Findings) -> None:
        role = "closed" if "closed" in item.pr.roles else "superseded"
        if item.pr.state == "open":
            code = OPEN[role]
            draft = " (a draft)" if item.pr.draft else ""
            findings.add(
                code,
                f"{role} PR #{item.pr.number} is still open{draft} on {item.forge.repo}: anyone can merge it",
                component=item.component,
                pr=item.pr.number,
            )
        elif item.pr.state == "merged":
            findings.add(
                MERGED[role],
                f"{role} PR #{item.pr.number} was merged on the forge at {item.pr.merged_at} "
                f"into {item.pr.base_ref or '?'}",
                component=item.component,
                pr=item.pr.number,
            )
