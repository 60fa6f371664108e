"""A PR carries no copy (same patch-id, another commit) of a commit of a PR it depends on (``after:``).

Seed 000: the integration PR #648 held a duplicate of a commit of its prerequisite #645.
A warning: merging both gives the same tree (git applies an identical change once), but
the duplicate must be removed from the dependent PR before it is reviewed and merged.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.git.history import EMPTY_PATCH
from releasekit.manifest import parse_pr_reference
from releasekit.plan.checks.context import PlanContext, short


class DuplicatedPrerequisiteCommits:
    name = "duplicated-prerequisite-commits"
    codes = ("DUPLICATED_PREREQUISITE_COMMIT",)

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            for planned in cs.comp.merge_plan:
                mine = cs.pr_patches.get(planned.pr)
                if not mine:
                    continue
                for ref in planned.after:
                    key = parse_pr_reference(ref, name)
                    if key.component != name:
                        continue  # another repository: no shared commits to duplicate
                    theirs = cs.pr_patches.get(key.number)
                    if not theirs:
                        continue
                    by_pid: dict[str, str] = {}
                    for commit, pid in theirs.items():
                        by_pid.setdefault(pid, commit)
                    for commit, pid in mine.items():
                        twin = by_pid.get(pid)
                        if pid == EMPTY_PATCH or twin is None or twin == commit or commit in theirs:
                            continue  # the same commit (a stacked PR) is not a duplicate
                        findings.add(
                            "DUPLICATED_PREREQUISITE_COMMIT",
                            f"PR #{planned.pr} commit {short(commit)} duplicates commit {short(twin)} of PR #{key.number}, "
                            f"which it lands after: remove it from PR #{planned.pr}",
                            severity=Severity.warning,
                            component=name,
                            pr=planned.pr,
                            commit=commit,
                        )
        return findings
