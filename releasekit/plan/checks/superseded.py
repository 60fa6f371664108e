"""Superseded and closed PRs are not on canonical, by ancestry or by any patch-equivalent copy.

One check for both roles so the findings keep the order of the component's statuses.
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext, short


class SupersededAbsent:
    name = "superseded-absent"
    codes = ("SUPERSEDED_PR_MERGED", "CLOSED_PR_MERGED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            for st in cs.statuses:
                if st.role not in ("superseded", "closed") or st.state != "present" or st.pr is None:
                    continue
                code = "SUPERSEDED_PR_MERGED" if st.role == "superseded" else "CLOSED_PR_MERGED"
                ms = cs.states.get(-st.pr)
                how = ms.how if ms and ms.how else "patch-id (some commits)"
                findings.add(
                    code,
                    f"{st.role} PR #{st.pr} is on {cs.branch} ({how}, landed at {short(st.landed_at)})",
                    component=name,
                    pr=st.pr,
                )
        return findings
