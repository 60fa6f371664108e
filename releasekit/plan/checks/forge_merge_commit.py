"""The forge's merge commit of each merged planned or already-canonical PR agrees with git.

GitHub's ``merge_commit_sha`` of a merged PR is the merge commit, the squash commit or the
last rebased commit. Git agrees when that commit exists and is on the checked canonical
history, and when git (ancestry or patch-id) also finds the PR merged there.
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import short
from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck, ForgeItem


class ForgeMergeCommitsAgree(ForgeCheck):
    name = "forge-merge-commits-agree"
    codes = ("FORGE_MERGE_COMMIT_MISMATCH", NOT_RUN)
    roles = frozenset({"planned", "already_canonical"})

    def judge_pr(self, item: ForgeItem, findings: Findings) -> None:
        pr, cs = item.pr, item.state
        if pr.state != "merged":
            return
        sha = pr.merge_commit_sha
        problem = None
        if sha is None:
            problem = "the forge names no merge commit"
        elif not cs.mirror.has_commit(sha):
            problem = f"its merge commit {short(sha)} is not in the repository"
        elif cs.history is None or not cs.history.contains(cs.mirror.resolve(sha)):
            problem = f"its merge commit {short(sha)} is not on {cs.branch} at {short(cs.checked)}"
        else:
            st = cs.states.get(pr.number)
            if st is not None and not st.merged:
                problem = f"git does not find #{pr.number} merged on {cs.branch} (merge commit {short(sha)})"
        if problem:
            findings.add(
                "FORGE_MERGE_COMMIT_MISMATCH",
                f"#{pr.number} is merged on the forge, but {problem}",
                component=item.component,
                pr=pr.number,
            )
