"""Every planned PR is on the canonical branch, whole."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext, short


class PlannedPRsMerged:
    name = "planned-prs-merged"
    codes = ("PR_MISSING", "PR_PARTIALLY_MERGED", "PR_NOT_MERGED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            if cs.history is None:
                continue
            for planned in cs.comp.merge_plan:
                if planned.pr not in cs.heads:
                    findings.add(
                        "PR_MISSING",
                        f"no refs/pull/{planned.pr}/head on {cs.mirror.url} and none in the lock",
                        component=name,
                        pr=planned.pr,
                    )
                    continue
                st = cs.states[planned.pr]
                if st.merged:
                    continue
                if st.present:
                    findings.add(
                        "PR_PARTIALLY_MERGED",
                        f"{len(st.present)} of {len(st.present) + len(st.missing)} commits of PR #{planned.pr} are on {cs.branch}; "
                        f"missing: {', '.join(short(c) for c in st.missing[:5])}",
                        component=name,
                        pr=planned.pr,
                    )
                else:
                    findings.add(
                        "PR_NOT_MERGED",
                        f"PR #{planned.pr} (head {short(cs.heads[planned.pr])}) is not on {cs.branch}: not an ancestor, "
                        "no patch-equivalent commits, no matching squash commit",
                        component=name,
                        pr=planned.pr,
                    )
        return findings
