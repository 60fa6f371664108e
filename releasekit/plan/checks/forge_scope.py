"""What the forge checks share: which PRs each one examines, and how "not run" is reported
(``ForgeCheck``, the base every forge check extends).

A forge check never passes for want of data. Where a component's forge facts are absent
(``--no-forge``, no forge reachable, not a GitHub repository, a lock from before forge
reading) it reports ``FORGE_CHECK_NOT_RUN`` with the reason: info, or an error under
``--require-forge``. Where the manifest names no PR of the roles a check is about, it says
so (info): it examined nothing, and does not claim to have passed.
"""

from __future__ import annotations

from dataclasses import dataclass

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.context import ComponentState, PlanContext
from releasekit.records.forge import ForgeComponent, ForgePR

NOT_RUN = "FORGE_CHECK_NOT_RUN"


@dataclass(frozen=True)
class ForgeItem:
    component: str
    state: ComponentState
    forge: ForgeComponent
    pr: ForgePR
    source: str  # "forge": read by this check run; "lock": as plan lock recorded it


@dataclass(frozen=True)
class NotRun:
    message: str
    severity: Severity
    component: str | None = None


@dataclass(frozen=True)
class ForgeScope:
    items: tuple[ForgeItem, ...]  # the found PRs of the check's roles, with their forge facts
    not_run: tuple[NotRun, ...]  # for the check to report as NOT_RUN


def forge_scope(ctx: PlanContext, check: str, roles: set[str]) -> ForgeScope:
    """Each found PR of ``roles`` with its component's forge facts, and where the check cannot run."""
    severity = Severity.error if ctx.require_forge else Severity.info
    named = 0
    items: list[ForgeItem] = []
    not_run: list[NotRun] = []
    for name, cs in ctx.components.items():
        comp = ctx.forge.component(name) if ctx.forge else None
        if comp is None or comp.status != "read":
            wanted = _named_numbers(cs, roles)
            if wanted:
                named += len(wanted)
                why = (comp.reason if comp else None) or (
                    "the lock holds no forge data and none was read" if ctx.forge is None else "no forge data"
                )
                not_run.append(NotRun(f"{check} not run for {len(wanted)} PR(s): {why}", severity, name))
            continue
        for pr in comp.pull_requests:
            if not roles.intersection(pr.roles):
                continue
            named += 1
            if pr.found:
                items.append(ForgeItem(name, cs, comp, pr, ctx.forge_sources.get(name, "forge")))
    if named == 0:
        what = " or ".join(sorted(roles))
        not_run.append(
            NotRun(f"{check}: nothing to examine (the manifest names no {what} PR)", Severity.info)
        )
    return ForgeScope(tuple(items), tuple(not_run))


def _named_numbers(cs: ComponentState, roles: set[str]) -> set[int]:
    comp = cs.comp
    numbers: set[int] = set()
    if "planned" in roles:
        numbers |= {p.pr for p in comp.merge_plan}
    if "already_canonical" in roles:
        numbers |= {c.pr for c in comp.already_canonical if c.pr is not None}
    if "closed" in roles:
        numbers |= {c.pr for c in comp.closed}
    if "superseded" in roles:
        numbers |= {n for e in comp.superseding() for n in e.supersedes}
    return numbers


class ForgeCheck:
    """A plan check on the forge's facts: it reports first where it cannot run (``forge_scope``),
    then judges the found PRs of its ``roles``. A subclass declares ``name``, ``codes`` (with
    ``NOT_RUN``) and ``roles``, and writes ``judge_pr``, or ``judge`` to look past the found PRs."""

    name: str
    codes: tuple[str, ...] = (NOT_RUN,)
    roles: frozenset[str] = frozenset()

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        scope = forge_scope(ctx, self.name, set(self.roles))
        for skip in scope.not_run:
            findings.add(NOT_RUN, skip.message, severity=skip.severity, component=skip.component)
        self.judge(ctx, scope.items, findings)
        return findings

    def judge(self, ctx: PlanContext, items: tuple[ForgeItem, ...], findings: Findings) -> None:
        for item in items:
            self.judge_pr(item, findings)

    def judge_pr(self, item: ForgeItem, findings: Findings) -> None:
        raise NotImplementedError(f"{type(self).__name__} judges no PR")
