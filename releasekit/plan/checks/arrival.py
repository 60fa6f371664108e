"""Each planned PR arrived on its own (merge, fast-forward, squash, rebase), not inside another PR's merge.

When #103 is built on #97 and #103 is merged first, #97 is on canonical (its head is an
ancestor) but never had its own merge: the plan "merge #97, then #103" was not followed.
That is a deviation from the plan, an error, unless the manifest acknowledges how the PR
arrived (``arrived_in: 103`` on #97): then it is recorded (info) and RELEASE.md says so.
An acknowledgement that git contradicts (#97 had its own merge, or came in with another PR)
is an error too: the manifest must say what happened.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.context import PlanContext, short


class PRsArrivedOnTheirOwn:
    name = "prs-arrived-on-their-own"
    codes = ("PR_ARRIVED_INSIDE_ANOTHER", "PR_ARRIVAL_ACKNOWLEDGED", "ARRIVED_IN_CONTRADICTED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            for planned in cs.comp.merge_plan:
                st = cs.status(planned.pr, "planned")
                if st is None or st.arrival is None:
                    continue  # not merged: PR_NOT_MERGED says so
                acknowledged = planned.arrived_in
                inside = st.arrival == "inside"
                if inside and acknowledged is not None and st.arrived_inside == acknowledged:
                    findings.add(
                        "PR_ARRIVAL_ACKNOWLEDGED",
                        f"PR #{planned.pr} never had its own merge: it arrived inside PR #{acknowledged} "
                        f"at {short(st.landed_at)}, as the manifest acknowledges (arrived_in: {acknowledged})",
                        severity=Severity.info,
                        component=name,
                        pr=planned.pr,
                    )
                elif inside:
                    via = (
                        f"inside PR #{st.arrived_inside}"
                        if st.arrived_inside
                        else f"inside merge {short(st.landed_at)}"
                    )
                    how = "squashed" if st.state != "merged" else f"merged at {short(st.landed_at)}"
                    hint = (
                        f"; the plan merges #{planned.pr} on its own (acknowledge it with "
                        f"'arrived_in: {st.arrived_inside}' if that is what was intended)"
                        if st.arrived_inside
                        else "; the plan merges it on its own"
                    )
                    findings.add(
                        "PR_ARRIVED_INSIDE_ANOTHER",
                        f"PR #{planned.pr} never had its own merge: it arrived {via} ({how}){hint}",
                        component=name,
                        pr=planned.pr,
                    )
                    if acknowledged is not None:
                        findings.add(
                            "ARRIVED_IN_CONTRADICTED",
                            f"the manifest says PR #{planned.pr} arrived inside PR #{acknowledged}; "
                            f"it arrived {via}",
                            component=name,
                            pr=planned.pr,
                        )
                elif acknowledged is not None:
                    findings.add(
                        "ARRIVED_IN_CONTRADICTED",
                        f"the manifest says PR #{planned.pr} arrived inside PR #{acknowledged}; "
                        f"it arrived by {st.arrival} at {short(st.landed_at)}: remove 'arrived_in'",
                        component=name,
                        pr=planned.pr,
                    )
        return findings
