"""Every PR the manifest names names something: git has its head, or the forge knows it.

A planned PR without a head is ``PR_MISSING`` (planned-prs-merged). A superseded, closed,
already-canonical or excluded PR that git has no head for (no ``refs/pull/N/head`` in the
mirror, none in the lock) cannot be judged by git: whether it is on the canonical branch is
not known, and saying "absent" or "missing" would be a claim git did not make. It is one
finding naming the number and what is missing: ``PR_UNKNOWN`` when the forge does not know it
either (a 404, or the forge was not asked: a mistyped number), ``PR_CANNOT_TELL`` when the
forge knows it but git has nothing to compare. Both are errors: the plan says something about
each of these PRs (not merged, merged, excluded) that nothing here could check.
"""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import ComponentState, PlanContext, short
from releasekit.records.forge import ForgePR

RETIRED_ROLES = ("superseded", "closed", "already_canonical")


def _forge_answer(ctx: PlanContext, component: str, pr: int) -> tuple[ForgePR | None, str]:
    """The forge's record of ``pr`` when it found it, else (None, what the forge said or why it was not asked)."""
    comp = ctx.forge.component(component) if ctx.forge else None
    if comp is None or comp.status != "read":
        reason = (comp.reason if comp else None) or "the lock holds no forge data and none was read"
        return None, f"the forge was not asked ({reason})"
    found = next((p for p in comp.pull_requests if p.number == pr), None)
    if found is None:
        return None, f"the forge ({comp.repo}) was not asked for it"
    if not found.found:
        return None, f"the forge ({comp.repo}) answers 404 for it"
    return found, ""


def _what(cs: ComponentState, pr: int, role: str) -> str:
    if role == "superseded":
        by = [p.pr for p in cs.comp.merge_plan if pr in p.supersedes]
        by += [c.pr for c in cs.comp.already_canonical if pr in c.supersedes and c.pr is not None]
        return f"superseded PR #{pr}" + (f" (in the supersedes of #{by[0]})" if by else "")
    return f"{role.replace('_', '-')} PR #{pr}"


def _judge(ctx: PlanContext, cs: ComponentState, pr: int, role: str, findings: Findings) -> None:
    """One PR git has no head for: PR_UNKNOWN or PR_CANNOT_TELL."""
    missing = f"{cs.mirror.url} has no refs/pull/{pr}/head and the lock has none"
    if role == "superseded":
        missing += " (nor does the manifest name a head the mirror has)"
    what = _what(cs, pr, role)
    forge, said = _forge_answer(ctx, cs.name, pr)
    if forge is None:
        findings.add(
            "PR_UNKNOWN",
            f"{what} names nothing git or the forge knows: {missing}; {said}. "
            f"Whether it is on {cs.branch} cannot be told (a mistyped number?)",
            component=cs.name,
            pr=pr,
        )
        return
    head = ""
    if forge.head_sha:
        # Judged by refs only: a head the mirror holds under no ref is not taken on the forge's word.
        held = (
            "the mirror holds it under no PR ref"
            if cs.mirror.has_commit(forge.head_sha)
            else "not in the mirror"
        )
        head = f", head {short(forge.head_sha)}, {held}"
    findings.add(
        "PR_CANNOT_TELL",
        f"cannot tell whether {what} is on {cs.branch}: {missing}, so git has nothing to compare "
        f"(the forge knows it: {forge.state or 'state not given'}{head})",
        component=cs.name,
        pr=pr,
    )


class NamedPRsResolved:
    name = "named-prs-resolved"
    codes = ("PR_UNKNOWN", "PR_CANNOT_TELL")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for cs in ctx.components.values():
            if cs.history is None:
                continue  # the checked commit is not there (UNPUBLISHED_COMMIT): no PR was looked for
            for st in cs.statuses:
                if st.pr is not None and st.role in RETIRED_ROLES and st.state == "unknown":
                    _judge(ctx, cs, st.pr, st.role, findings)
            for pr in _excluded_prs(ctx, cs):
                if cs.mirror.pr_head(pr) is None:
                    _judge(ctx, cs, pr, "excluded", findings)
        return findings


def _excluded_prs(ctx: PlanContext, cs: ComponentState) -> list[int]:
    """The PR numbers of the exclusions that apply to ``cs`` (a PR number without ``component``
    names a PR of the one git component, and is checked only when there is one)."""
    single = len(ctx.components) == 1  # as exclusions-absent reads it
    return sorted(
        {
            excl.pr
            for excl in ctx.loaded.manifest.exclusions
            if excl.pr is not None and (excl.component == cs.name or (excl.component is None and single))
        }
    )
