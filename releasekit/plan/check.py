"""``plan check``: the canonical branches hold exactly the merge plan, in order.

The service reads each git component once into a read-only ``PlanContext`` (history read
once, every named PR located; see ``releasekit.plan.checks.context``), runs the checks of
``releasekit.plan.checks`` with ``AllOf``, then attaches to each PR's status the codes
found for it. Which commit is checked: the lock's commit when a lock is given (what the
build will use), else the manifest's pin, else the canonical head.
"""

from __future__ import annotations

from pathlib import Path

from releasekit.errors import InputError
from releasekit.findings import Finding, Findings
from releasekit.manifest import LoadedManifest
from releasekit.plan.carried import CarriedVerdict, verify_carried
from releasekit.plan.checks import ComponentState, PlanContext, build_state, plan_checks
from releasekit.plan.locking import open_mirror
from releasekit.plan.pins import audit_pins
from releasekit.plan.release_only import Upstream, find_release_only
from releasekit.plan.upstream import UpstreamPatches, read_upstream
from releasekit.plan.upstream_base import read_upstream_base
from releasekit.records.lock import Lock
from releasekit.records.plan_check import ComponentCheck, PlanCheckResult, PRStatus, ReleaseOnlyReport

# Which status (by role) a finding code belongs to; PR_HEAD_MOVED takes the lock's role.
STATUS_ROLE: dict[str, str] = {
    "PR_MISSING": "planned",
    "PR_PARTIALLY_MERGED": "planned",
    "PR_NOT_MERGED": "planned",
    "MERGED_OUT_OF_ORDER": "planned",
    "AFTER_VIOLATED": "planned",
    "SUPERSEDED_PR_MERGED": "superseded",
    "CLOSED_PR_MERGED": "closed",
    "ALREADY_CANONICAL_MISSING": "already_canonical",
    "CARRIED_COMMIT_MISSING": "planned",
    "CARRIED_CHANGE_ABSENT": "planned",
    "DUPLICATED_PREREQUISITE_COMMIT": "planned",
    "PR_ARRIVED_INSIDE_ANOTHER": "planned",
}


def _roles_of(cs: ComponentState, finding: Finding) -> set[str]:
    if finding.code == "PR_HEAD_MOVED":
        return {
            p.role for p in (cs.locked.pull_requests if cs.locked else []) if p.number == finding.location.pr
        }
    role = STATUS_ROLE.get(finding.code)
    return {role} if role else set()


def statuses_with_codes(cs: ComponentState, findings: Findings) -> list[PRStatus]:
    """The component's PR statuses, each with the codes of the findings about it, in finding order."""
    codes: list[list[str]] = [[] for _ in cs.statuses]
    for finding in findings:
        where = finding.location
        if where.component != cs.name:
            continue
        roles = _roles_of(cs, finding)
        if not roles:
            continue
        for i, st in enumerate(cs.statuses):
            if st.role not in roles or st.pr != where.pr:
                continue
            if st.pr is None and st.commit != where.commit:
                continue
            if finding.code not in codes[i]:
                codes[i].append(finding.code)
    return [st.model_copy(update={"codes": got}) for st, got in zip(cs.statuses, codes, strict=True)]


def _release_only(
    cs: ComponentState,
    ref: str,
    verdicts: tuple[CarriedVerdict, ...],
    upstream: tuple[Upstream | None, str | None] = (None, None),
) -> ReleaseOnlyReport:
    """Release-only commits of ``ref`` against the checked commit, with this plan's verified ``carries:``.

    Only a carried commit whose change the merged PR really contains (``verify_carried``)
    counts as canonicalised; a false ``carries:`` leaves the commit release-only.
    ``upstream``: the component's upstream (commits reachable from it are reported once),
    or why it could not be read.
    """
    carried = {
        v.commit: v.pr
        for v in verdicts
        if v.component == cs.name and v.verified and v.commit and v.pr in cs.states and cs.states[v.pr].merged
    }
    report = find_release_only(
        cs.mirror.git,
        cs.mirror.resolve(ref),
        cs.checked,
        repo=cs.mirror.url,
        release_name=ref,
        canonical_name=f"{cs.branch}@{cs.checked[:12]}",
        carried=carried,
        upstream=upstream[0],
        upstream_unread=upstream[1],
    )
    for finding in report.findings:
        finding.location.component = cs.name
    return report


def plan_context(
    loaded: LoadedManifest,
    *,
    lock: Lock | None = None,
    cache_dir: Path | None = None,
    allow_local: bool = False,
    fetch: bool = True,
    releases: dict[str, str] | None = None,
    pins_repo: Path | None = None,
) -> PlanContext:
    """Read everything the checks judge: each mirror once, the release branches, the pins."""
    for name in releases or {}:
        if name not in loaded.manifest.git_components():
            raise InputError(f"--release names {name!r}, which is not a git component of the manifest")
    components: dict[str, ComponentState] = {}
    for name, comp in loaded.manifest.git_components().items():
        mirror = open_mirror(comp, loaded, cache_dir=cache_dir, allow_local=allow_local, fetch=fetch)
        locked = lock.git_components().get(name) if lock else None
        components[name] = build_state(name, comp, mirror, locked)
    carried = tuple(v for cs in components.values() for v in verify_carried(cs))
    # The manifest's release refs are always audited; --release adds to them.
    audits: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
    for name, comp in loaded.manifest.git_components().items():
        for ref in comp.release_refs:
            try:
                components[name].mirror.resolve(ref)
            except InputError:
                missing.append((name, ref))
            else:
                audits.append((name, ref))
    for name, ref in (releases or {}).items():
        if (name, ref) not in audits:
            audits.append((name, ref))
    # A component's upstream (its `upstream:`), read once for all of its release refs.
    bases: dict[str, tuple[Upstream | None, str | None]] = {}
    for name, _ref in audits:
        base = loaded.manifest.git_components()[name].upstream
        if base is not None and name not in bases:
            mirror = components[name].mirror
            bases[name] = read_upstream_base(
                mirror.git,
                base,
                mirror_path=mirror.path,
                allow_local=allow_local,
                base_dir=loaded.directory,
                fetch=fetch,
            )
    reports = tuple(
        (name, _release_only(components[name], ref, carried, bases.get(name, (None, None))))
        for name, ref in audits
    )
    upstream: dict[tuple[str, str], UpstreamPatches] = {}
    for excl in loaded.manifest.exclusions:
        if excl.upstream is None:
            continue
        for name in [excl.component] if excl.component else list(components):
            if name in components:
                upstream[(excl.id, name)] = read_upstream(
                    components[name].mirror,
                    excl.upstream,
                    allow_local=allow_local,
                    base_dir=loaded.directory,
                    fetch=fetch,
                )
    pins = audit_pins(loaded.manifest, pins_repo) if pins_repo is not None else None
    return PlanContext(
        loaded=loaded,
        lock=lock,
        components=components,
        release_only=reports,
        release_missing=tuple(missing),
        pins=pins,
        carried=carried,
        upstream=upstream,
    )


def check_plan(
    loaded: LoadedManifest,
    *,
    lock: Lock | None = None,
    lock_sha256: str | None = None,
    cache_dir: Path | None = None,
    allow_local: bool = False,
    fetch: bool = True,
    releases: dict[str, str] | None = None,
    pins_repo: Path | None = None,
) -> PlanCheckResult:
    """Check every git component; ``releases`` (component -> release ref) and ``pins_repo`` add the audits."""
    ctx = plan_context(
        loaded,
        lock=lock,
        cache_dir=cache_dir,
        allow_local=allow_local,
        fetch=fetch,
        releases=releases,
        pins_repo=pins_repo,
    )
    findings = plan_checks().run(ctx)
    return PlanCheckResult(
        release_only=[report for _, report in ctx.release_only],
        pins=ctx.pins,
        passed=findings.passed,
        manifest_sha256=loaded.sha256,
        lock_sha256=lock_sha256,
        components=[
            ComponentCheck(
                component=cs.name,
                repo=cs.mirror.url,
                canonical_branch=cs.branch,
                checked_commit=cs.checked,
                canonical_head=cs.canonical_head,
                statuses=statuses_with_codes(cs, findings),
            )
            for cs in ctx.components.values()
        ],
        findings=findings,
    )
