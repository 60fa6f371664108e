"""A planned PR that is not on canonical yet merges into it cleanly (``git merge-tree --write-tree``).

``plan compose`` merges the plan in order in a work tree; ``plan check`` asks git, for each
planned PR not merged, whether its head merges into the checked commit on its own, and names
the files that conflict. Where git cannot tell (older than 2.38, an object the mirror lacks)
it says so, and why: it never reports such a PR as clean.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.context import PlanContext, short


class PlannedPRsMergeCleanly:
    name = "planned-prs-merge-cleanly"
    codes = ("PR_CONFLICTS_WITH_CANONICAL", "PR_CONFLICT_UNCHECKED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, prs in ctx.conflicts.items():
            cs = ctx.components[name]
            target = f"{cs.branch}@{short(cs.checked)}"
            for pr, merge in sorted(prs.items()):
                head = short(cs.heads.get(pr))
                if merge.unknown:
                    findings.add(
                        "PR_CONFLICT_UNCHECKED",
                        f"cannot tell whether PR #{pr} (head {head}) merges into {target}: {merge.unknown}",
                        severity=Severity.warning,
                        component=name,
                        pr=pr,
                    )
                elif merge.conflicts:
                    shown = ", ".join(merge.conflicts[:10])
                    more = f" (+{len(merge.conflicts) - 10} more)" if len(merge.conflicts) > 10 else ""
                    findings.add(
                        "PR_CONFLICTS_WITH_CANONICAL",
                        f"PR #{pr} (head {head}) conflicts with {target} in {len(merge.conflicts)} "
                        f"file(s): {shown}{more} (git merge-tree --write-tree)",
                        component=name,
                        pr=pr,
                        path=merge.conflicts[0],
                    )
        return findings
