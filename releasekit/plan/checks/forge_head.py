"""The forge's head of every planned or already-canonical PR is the head the plan was locked at.

The locked head is the lock's (read from ``refs/pull/N/head`` by ``plan lock``), or without a
lock the mirror's ``refs/pull/N/head``. A forge head that moved means the PR under review
is no longer the code that was qualified (seed 000).
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import short
from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck, ForgeItem


class ForgeHeadsMatchLock(ForgeCheck):
    name = "forge-heads-match-lock"
    codes = ("FORGE_HEAD_MOVED", NOT_RUN)
    roles = frozenset({"planned", "already_canonical"})

    def judge_pr(self, item: ForgeItem, findings: Findings) -> None:
        locked = next(
            (
                p.head
                for p in (item.state.locked.pull_requests if item.state.locked else [])
                if p.number == item.pr.number
            ),
            None,
        ) or item.state.heads.get(item.pr.number)
        if locked is None or item.pr.head_sha is None or item.pr.head_sha == locked:
            return
        what = "locked" if item.state.locked else "git's refs/pull head"
        when = "now" if item.source == "forge" else "when locked"
        findings.add(
            "FORGE_HEAD_MOVED",
            f"#{item.pr.number}'s head on the forge {when} is {short(item.pr.head_sha)}, "
            f"not {short(locked)} ({what})",
            component=item.component,
            pr=item.pr.number,
        )
