"""The commit the build will use exists on the remote, is reachable from a ref, and is on canonical."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.git.history import is_ancestor
from releasekit.plan.checks.context import PlanContext, short


class CheckedCommitPublished:
    name = "checked-commit-published"
    codes = ("UNPUBLISHED_COMMIT", "COMMIT_NOT_ON_CANONICAL", "CANONICAL_ADVANCED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            if not cs.mirror.has_commit(cs.checked):
                findings.add(
                    "UNPUBLISHED_COMMIT",
                    f"commit {cs.checked} does not exist on {cs.mirror.url}",
                    component=name,
                    commit=cs.checked,
                )
                continue
            if cs.mirror.published_by(cs.checked) is None:
                findings.add(
                    "UNPUBLISHED_COMMIT",
                    f"commit {short(cs.checked)} is not reachable from any branch, tag or PR head of {cs.mirror.url}",
                    component=name,
                    commit=cs.checked,
                )
            elif not is_ancestor(cs.mirror.git, cs.checked, cs.canonical_head):
                findings.add(
                    "COMMIT_NOT_ON_CANONICAL",
                    f"commit {short(cs.checked)} is not in the history of {cs.branch} (now {short(cs.canonical_head)})",
                    component=name,
                    commit=cs.checked,
                )
            elif cs.locked and cs.canonical_head != cs.checked:
                findings.add(
                    "CANONICAL_ADVANCED",
                    f"{cs.branch} moved on since the lock ({short(cs.checked)} -> {short(cs.canonical_head)}); "
                    "the locked commit is what was checked",
                    severity=Severity.info,
                    component=name,
                    commit=cs.canonical_head,
                )
            if cs.locked:
                for cc in cs.locked.canonical_commits:
                    if cs.mirror.published_by(cc.commit) is None:
                        findings.add(
                            "UNPUBLISHED_COMMIT",
                            f"already-canonical commit {cc.given} is not reachable from any ref",
                            component=name,
                            commit=cc.commit,
                        )
        return findings
