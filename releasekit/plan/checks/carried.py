"""Every ``carries:`` entry names a commit that exists, and its PR contains a patch-equivalent change."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class CarriedCommitsVerified:
    name = "carried-commits-verified"
    codes = ("CARRIED_COMMIT_MISSING", "CARRIED_CHANGE_ABSENT")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for v in ctx.carried:
            if v.verdict == "missing":
                findings.add(
                    "CARRIED_COMMIT_MISSING",
                    f"PR #{v.pr} carries {v.prefix}, which is not a commit of {ctx.components[v.component].mirror.url} "
                    "(not on any branch, tag or PR head)",
                    component=v.component,
                    pr=v.pr,
                )
            elif v.verdict == "absent":
                findings.add(
                    "CARRIED_CHANGE_ABSENT",
                    f"PR #{v.pr} claims to carry {v.prefix} but does not: {v.evidence}",
                    component=v.component,
                    pr=v.pr,
                    commit=v.commit,
                )
        return findings
