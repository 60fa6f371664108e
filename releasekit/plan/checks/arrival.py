"""Each planned PR arrived on its own (merge, fast-forward, squash, rebase), not inside another PR's merge.

When #103 is built on #97 and #103 is merged first, #97 is on canonical (its head is an
ancestor) but never had its own merge: the plan "merge #97, then #103" was not what
happened. A warning: the tree is the same; the record of how it landed is not.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.context import PlanContext, short


class PRsArrivedOnTheirOwn:
    name = "prs-arrived-on-their-own"
    codes = ("PR_ARRIVED_INSIDE_ANOTHER",)

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            for planned in cs.comp.merge_plan:
                st = cs.status(planned.pr, "planned")
                if st is None or st.arrival != "inside":
                    continue
                via = (
                    f"inside PR #{st.arrived_inside}"
                    if st.arrived_inside
                    else f"inside merge {short(st.landed_at)}"
                )
                how = "squashed" if st.state != "merged" else f"merged at {short(st.landed_at)}"
                findings.add(
                    "PR_ARRIVED_INSIDE_ANOTHER",
                    f"PR #{planned.pr} never had its own merge: it arrived {via} ({how})"
                    + (f"; the plan merges #{planned.pr} on its own" if st.arrived_inside else ""),
                    severity=Severity.warning,
                    component=name,
                    pr=planned.pr,
                )
        return findings
