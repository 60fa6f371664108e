"""Every PR head recorded in the lock is still where ``refs/pull/N/head`` points."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.context import PlanContext, short


class PRHeadsUnmoved:
    name = "pr-heads-unmoved"
    codes = ("PR_HEAD_GONE", "PR_HEAD_MOVED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            if cs.locked is None:
                continue
            for lpr in cs.locked.pull_requests:
                now = cs.mirror.pr_head(lpr.number)
                if now is None:
                    if lpr.role == "planned":
                        findings.add(
                            "PR_HEAD_GONE",
                            f"{lpr.ref} no longer exists (locked at {short(lpr.head)})",
                            severity=Severity.warning,
                            component=name,
                            pr=lpr.number,
                        )
                elif now != lpr.head:
                    findings.add(
                        "PR_HEAD_MOVED",
                        f"{lpr.ref} moved from {short(lpr.head)} (locked) to {short(now)}",
                        severity=Severity.error
                        if lpr.role in ("planned", "already_canonical")
                        else Severity.warning,
                        component=name,
                        pr=lpr.number,
                    )
        return findings
