"""Every PR the manifest names exists on the forge (a 404 means deleted, or the wrong repository)."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.context import PlanContext
from releasekit.plan.checks.forge_scope import NOT_RUN, ForgeCheck, ForgeItem

ROLES = frozenset({"planned", "already_canonical", "closed", "superseded", "excluded"})


class NamedPRsOnForge(ForgeCheck):
    name = "forge-prs-exist"
    codes = ("FORGE_PR_NOT_FOUND", NOT_RUN)
    roles = ROLES

    def judge(self, ctx: PlanContext, items: tuple[ForgeItem, ...], findings: Findings) -> None:
        # A PR the forge does not find is no item of the scope: look at every component's answers.
        for name in ctx.components:
            comp = ctx.forge.component(name) if ctx.forge else None
            if comp is None or comp.status != "read":
                continue
            for pr in comp.pull_requests:
                if pr.found:
                    continue
                needed = bool({"planned", "already_canonical"} & set(pr.roles))
                findings.add(
                    "FORGE_PR_NOT_FOUND",
                    f"{comp.repo} on {comp.api_url} answers 404 for #{pr.number} ({', '.join(pr.roles)})",
                    severity=Severity.error if needed else Severity.warning,
                    component=name,
                    pr=pr.number,
                )
