"""``plan check``: the canonical branches hold exactly the merge plan, in order.

The service reads each git component once into a read-only ``PlanContext`` (history read
once, every named PR located; see ``releasekit.plan.checks.context``), runs the checks of
``releasekit.plan.checks`` with ``AllOf``, then attaches to each PR's status the codes
found for it. Which commit is checked: the lock's commit when a lock is given (what the
build will use), else the manifest's pin, else the canonical head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from releasekit.errors import InputError
from releasekit.findings import Finding, Findings
from releasekit.git.mirrors import configured_mirrors
from releasekit.git.missing import missing_object_note
from releasekit.git.remote import check_remote
from releasekit.git.runner import GitFailed
from releasekit.git.tree import work_tree_state
from releasekit.manifest import LoadedManifest
from releasekit.plan.carried import CarriedVerdict, verify_carried
from releasekit.plan.checks import ComponentState, PlanContext, build_state, plan_checks
from releasekit.plan.checks.context import planned_conflicts
from releasekit.plan.content.gather import content_scans
from releasekit.plan.forge_read import ForgeOpener, read_forge
from releasekit.plan.locking import open_mirror
from releasekit.plan.pins import audit_pins, commit_tree
from releasekit.plan.release_only import Upstream, find_release_only
from releasekit.plan.upstream import UpstreamPatches, read_upstream
from releasekit.plan.upstream_base import read_upstream_base
from releasekit.records.forge import ForgeData
from releasekit.records.lock import Lock
from releasekit.records.plan_check import (
    ComponentCheck,
    PinAuditResult,
    PlanCheckResult,
    PRStatus,
    ReleaseOnlyReport,
)

# Which status (by role) a finding code belongs to; PR_HEAD_MOVED takes the lock's role.
STATUS_ROLE: dict[str, str] = {
    "PR_MISSING": "planned",
    "PR_PARTIALLY_MERGED": "planned",
    "PR_NOT_MERGED": "planned",
    "PR_CONFLICTS_WITH_CANONICAL": "planned",
    "PR_CONFLICT_UNCHECKED": "planned",
    "MERGED_OUT_OF_ORDER": "planned",
    "AFTER_VIOLATED": "planned",
    "SUPERSEDED_PR_MERGED": "superseded",
    "CLOSED_PR_MERGED": "closed",
    "ALREADY_CANONICAL_MISSING": "already_canonical",
    "CARRIED_COMMIT_MISSING": "planned",
    "CARRIED_CHANGE_ABSENT": "planned",
    "DUPLICATED_PREREQUISITE_COMMIT": "planned",
    "PR_ARRIVED_INSIDE_ANOTHER": "planned",
    "PR_ARRIVAL_ACKNOWLEDGED": "planned",
    "ARRIVED_IN_CONTRADICTED": "planned",
    "PLANNED_PR_IS_DRAFT": "planned",
    "PLANNED_PR_WRONG_BASE": "planned",
    "SUPERSEDED_PR_OPEN": "superseded",
    "SUPERSEDED_PR_MERGED_ON_FORGE": "superseded",
    "CLOSED_PR_OPEN": "closed",
    "CLOSED_PR_MERGED_ON_FORGE": "closed",
    "CANONICAL_PR_NOT_MERGED_ON_FORGE": "already_canonical",
}


def _roles_of(cs: ComponentState, finding: Finding) -> set[str]:
    if finding.code in (
        "PR_HEAD_MOVED",
        "FORGE_HEAD_MOVED",
        "FORGE_MERGE_COMMIT_MISMATCH",
        "FORGE_PR_NOT_FOUND",
    ):
        return {
            p.role for p in (cs.locked.pull_requests if cs.locked else []) if p.number == finding.location.pr
        }
    if finding.code in ("PR_UNKNOWN", "PR_CANNOT_TELL"):
        return {s.role for s in cs.statuses if s.pr == finding.location.pr}
    role = STATUS_ROLE.get(finding.code)
    return {role} if role else set()


def statuses_with_codes(cs: ComponentState, findings: Findings) -> list[PRStatus]:
    """The component's PR statuses, each with the codes of the findings about it, in the order
    findings are written (``Finding.sort_key``: the same whatever order the checks found them in)."""
    codes: list[list[str]] = [[] for _ in cs.statuses]
    for finding in findings.sorted():
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


def forge_facts(
    loaded: LoadedManifest,
    lock: Lock | None,
    components: dict[str, ComponentState],
    *,
    live: bool,
    forges: ForgeOpener,
) -> tuple[ForgeData | None, dict[str, str]]:
    """The forge's facts as of now (``live``: asked through ``forges``), each component the forge did
    not answer for taken from the lock instead; component -> where its facts came from ("forge" or "lock")."""
    locked = lock.forge if lock else None
    if not live:
        if locked is None:
            return None, {}
        return locked, {n: "lock" for n, c in locked.components.items() if c.status == "read"}
    branches = {name: cs.branch for name, cs in components.items()}
    now = read_forge(loaded, forges=forges, branches=branches)
    merged = dict(now.components)
    sources = {n: "forge" for n, c in merged.items() if c.status == "read"}
    for name, comp in (locked.components if locked else {}).items():
        if comp.status == "read" and merged.get(name, comp).status != "read":
            merged[name] = comp
            sources[name] = "lock"
    return ForgeData(components=merged), sources


@dataclass(frozen=True)
class PlanCheckOptions:
    """What ``plan check`` is asked to judge, beyond the manifest: built once by the caller.

    ``lock``: check the locked commits and PR heads (``lock_sha256`` is recorded with the
    result); ``releases`` (component -> release ref), ``pins`` and ``pins_repo`` add audits;
    ``forge``: ask the forge now (else judge the lock's forge record); ``require_forge``: a
    forge check that cannot run is an error.
    """

    lock: Lock | None = None
    lock_sha256: str | None = None
    cache_dir: Path | None = None
    allow_local: bool = False
    fetch: bool = True
    releases: dict[str, str] = field(default_factory=dict)
    pins_repo: Path | None = None
    pins: tuple[str, ...] = ()
    forge: bool = True
    require_forge: bool = False


def plan_context(loaded: LoadedManifest, options: PlanCheckOptions, *, forges: ForgeOpener) -> PlanContext:
    """Read everything the checks judge: each mirror once, the release branches, the pins, the forge
    (through ``forges``, made by the command; asked only with ``options.forge``)."""
    for name in options.releases:
        if name not in loaded.manifest.git_components():
            raise InputError(f"--release names {name!r}, which is not a git component of the manifest")
    components, unreadable = _read_components(
        loaded, options.lock, options.cache_dir, options.allow_local, options.fetch
    )
    carried = tuple(v for cs in components.values() for v in verify_carried(cs))
    audits, missing = _audited_refs(loaded, components, options.releases)
    bases = _upstream_bases(loaded, components, audits, options.allow_local, options.fetch)
    reports = tuple(
        (name, _release_only(components[name], ref, carried, bases.get(name, (None, None))))
        for name, ref in audits
    )
    upstream = _exclusion_upstreams(loaded, components, options.allow_local, options.fetch)
    pin_audits = _pin_audits(loaded, components, list(options.pins), options.pins_repo)
    forge_data, forge_sources = forge_facts(
        loaded, options.lock, components, live=options.forge, forges=forges
    )
    return PlanContext(
        loaded=loaded,
        lock=options.lock,
        components=components,
        release_only=reports,
        release_missing=tuple(missing),
        pins=pin_audits,
        carried=carried,
        upstream=upstream,
        forge=forge_data,
        forge_sources=forge_sources,
        require_forge=options.require_forge,
        unreadable=unreadable,
        content=content_scans(loaded, {n: (cs.mirror, cs.checked) for n, cs in components.items()}, audits),
        conflicts={name: planned_conflicts(cs) for name, cs in components.items()},
    )


def _read_components(
    loaded: LoadedManifest,
    lock: Lock | None,
    cache_dir: Path | None,
    allow_local: bool,
    fetch: bool,
) -> tuple[dict[str, ComponentState], dict[str, str]]:
    """(components read, unreadable ones with why): one component that cannot be read does not hide the others."""
    components: dict[str, ComponentState] = {}
    unreadable: dict[str, str] = {}
    # An unsafe or malformed address or mirror list is bad input (exit 2), not an unreadable component.
    configured_mirrors()
    for comp in loaded.manifest.git_components().values():
        check_remote(comp.repo, allow_local=allow_local, base_dir=loaded.directory)
    for name, comp in loaded.manifest.git_components().items():
        # One component that cannot be read is a finding for it; the others are still checked.
        mirror = None
        try:
            mirror = open_mirror(comp, loaded, cache_dir=cache_dir, allow_local=allow_local, fetch=fetch)
            locked = lock.git_components().get(name) if lock else None
            components[name] = build_state(name, comp, mirror, locked)
        except (InputError, GitFailed) as exc:
            note = missing_object_note(mirror.git, exc) if mirror and isinstance(exc, GitFailed) else ""
            unreadable[name] = exc.one_line() + note
    return components, unreadable


def _audited_refs(
    loaded: LoadedManifest,
    components: dict[str, ComponentState],
    releases: dict[str, str] | None,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(audited, missing) release refs: the manifest's are always audited, so a missing one is reported."""
    # The manifest's release refs are always audited; --release adds to them.
    audits: list[tuple[str, str]] = []
    missing: list[tuple[str, str]] = []
    for name, comp in loaded.manifest.git_components().items():
        if name not in components:
            continue
        for ref in comp.release_refs:
            try:
                components[name].mirror.resolve(ref)
            except InputError:
                missing.append((name, ref))
            else:
                audits.append((name, ref))
    for name, ref in (releases or {}).items():
        if (name, ref) not in audits and name in components:
            audits.append((name, ref))
    return audits, missing


def _upstream_bases(
    loaded: LoadedManifest,
    components: dict[str, ComponentState],
    audits: list[tuple[str, str]],
    allow_local: bool,
    fetch: bool,
) -> dict[str, tuple[Upstream | None, str | None]]:
    """A component's upstream (its `upstream:`), read once for all of its release refs."""
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
    return bases


def _exclusion_upstreams(
    loaded: LoadedManifest,
    components: dict[str, ComponentState],
    allow_local: bool,
    fetch: bool,
) -> dict[tuple[str, str], UpstreamPatches]:
    """The upstream patches each exclusion names, per component it applies to, read before any check runs."""
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
    return upstream


def _pin_audits(
    loaded: LoadedManifest,
    components: dict[str, ComponentState],
    named: list[str],
    pins_repo: Path | None,
) -> tuple[PinAuditResult, ...]:
    """Audit pins at the checked commit of each component with ``pin_inputs``, named by ``--pins``,
    or whose checked commit a clean ``--pins-repo`` work tree is at; read through git objects."""
    wanted = [name for name, comp in loaded.manifest.git_components().items() if comp.pin_inputs is not None]
    for name in named:
        if name not in components:
            raise InputError(f"--pins names {name!r}, which is not a git component of the manifest")
        wanted.append(name)
    if pins_repo is not None:
        state = work_tree_state(pins_repo)
        if not state.clean:
            raise InputError(
                f"--pins-repo {pins_repo} has uncommitted changes ({'; '.join(state.changes)}): "
                "pins are read from the checked commit, so the work tree must be clean"
            )
        at = [name for name, cs in components.items() if cs.checked == state.head]
        if not at:
            checked = ", ".join(f"{name}@{cs.checked[:12]}" for name, cs in components.items())
            raise InputError(
                f"--pins-repo {pins_repo} is at {state.head[:12]}, not at the checked commit of any "
                f"git component ({checked}): its pins would not be the release's"
            )
        wanted.extend(at)
    audits: list[PinAuditResult] = []
    for name in dict.fromkeys(wanted):
        if name not in components or not components[name].mirror.has_commit(components[name].checked):
            # Unreadable (COMPONENT_UNREADABLE) or a checked commit the repository lacks
            # (UNPUBLISHED_COMMIT): that one finding says why; there is no tree to read pins from.
            continue
        cs = components[name]
        comp = loaded.manifest.git_components()[name]
        audits.append(
            audit_pins(
                loaded.manifest,
                commit_tree(cs.mirror.git, cs.checked),
                repo=cs.mirror.url,
                commit=cs.checked,
                component=name,
                skip=comp.pin_inputs.skip if comp.pin_inputs else [],
            )
        )
    return tuple(audits)


def check_plan(
    loaded: LoadedManifest, options: PlanCheckOptions | None = None, *, forges: ForgeOpener
) -> PlanCheckResult:
    """Check every git component; the options' ``releases``, ``pins`` and ``pins_repo`` add the audits.
    ``forges``: the forge clients' opener the command made (``forge.GitHubForges()``)."""
    opts = options or PlanCheckOptions()
    ctx = plan_context(loaded, opts, forges=forges)
    findings = plan_checks().run(ctx)
    return PlanCheckResult(
        release_only=[report for _, report in ctx.release_only],
        pins=list(ctx.pins),
        passed=findings.passed,
        manifest_sha256=loaded.sha256,
        lock_sha256=opts.lock_sha256,
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
