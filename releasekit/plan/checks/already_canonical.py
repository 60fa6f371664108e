"""Changes the manifest lists as already canonical are on the canonical branch."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class AlreadyCanonicalPresent:
    name = "already-canonical-present"
    codes = ("ALREADY_CANONICAL_MISSING",)

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            for st in cs.statuses:
                # "unknown": git has no head for the PR, so it cannot say (named-prs-resolved says so).
                if st.role == "already_canonical" and st.state not in ("merged", "present", "unknown"):
                    what = f"PR #{st.pr}" if st.pr is not None else f"commit {st.commit}"
                    findings.add(
                        "ALREADY_CANONICAL_MISSING",
                        f"{what} is listed as already canonical but is not on {cs.branch}",
                        component=name,
                        pr=st.pr,
                        commit=st.commit,
                    )
        return findings
