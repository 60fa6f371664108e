"""``plan check``: the canonical branches hold exactly the merge plan, in order.

The service builds one ``ComponentState`` per git component (history read once, every
named PR located), then applies small checks, each a class with a ``name`` that adds
findings with stable codes. Which commit is checked: the lock's commit when a lock is
given (what the build will use), else the manifest's pin, else the canonical head.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.git.history import commit_info, diff_patch_id, is_ancestor, merge_base, patch_ids
from releasekit.git.mirror import Mirror
from releasekit.manifest import LoadedManifest, parse_pr_reference
from releasekit.manifest.models import TO_BE_LOCKED, Exclusion, GitComponent
from releasekit.plan.locking import open_mirror
from releasekit.plan.merged import CanonicalHistory, MergeState
from releasekit.plan.pins import audit_pins
from releasekit.plan.release_only import find_release_only
from releasekit.records.lock import Lock, LockedGitComponent
from releasekit.records.plan_check import ComponentCheck, PlanCheckResult, PRStatus, ReleaseOnlyReport


@dataclass
class ComponentState:
    name: str
    comp: GitComponent
    mirror: Mirror
    locked: LockedGitComponent | None
    branch: str
    canonical_head: str
    checked: str
    history: CanonicalHistory | None = None
    heads: dict[int, str] = field(default_factory=dict)  # PR -> head used for the check
    states: dict[int, MergeState] = field(default_factory=dict)
    statuses: list[PRStatus] = field(default_factory=list)
    times: dict[str, int] = field(default_factory=dict)  # landing commit -> committer time

    def status(self, pr: int, role: str) -> PRStatus | None:
        return next((s for s in self.statuses if s.pr == pr and s.role == role), None)

    def landed_time(self, pr: int) -> int | None:
        st = self.states.get(pr)
        if st and st.landed_at:
            if st.landed_at not in self.times:
                self.times.update({c: t for c, (t, _) in commit_info(self.mirror.git, [st.landed_at]).items()})
            return self.times[st.landed_at]
        return None


@dataclass
class PlanContext:
    loaded: LoadedManifest
    lock: Lock | None
    components: dict[str, ComponentState]


class Check(Protocol):
    name: ClassVar[str]

    def run(self, ctx: PlanContext, findings: Findings) -> None: ...


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "?"


def _mark(ctx: ComponentState, pr: int, role: str, code: str) -> None:
    st = ctx.status(pr, role)
    if st and code not in st.codes:
        st.codes.append(code)


class CheckedCommitPublished:
    """The commit the build will use exists on the remote, is reachable from a ref, and is on canonical."""

    name = "checked-commit-published"

    def run(self, ctx: PlanContext, findings: Findings) -> None:
        for name, cs in ctx.components.items():
            if not cs.mirror.has_commit(cs.checked):
                findings.add("UNPUBLISHED_COMMIT", f"commit {cs.checked} does not exist on {cs.mirror.url}", component=name, commit=cs.checked)
                continue
            if cs.mirror.published_by(cs.checked) is None:
                findings.add(
                    "UNPUBLISHED_COMMIT",
                    f"commit {_short(cs.checked)} is not reachable from any branch, tag or PR head of {cs.mirror.url}",
                    component=name,
                    commit=cs.checked,
                )
            elif not is_ancestor(cs.mirror.git, cs.checked, cs.canonical_head):
                findings.add(
                    "COMMIT_NOT_ON_CANONICAL",
                    f"commit {_short(cs.checked)} is not in the history of {cs.branch} (now {_short(cs.canonical_head)})",
                    component=name,
                    commit=cs.checked,
                )
            elif cs.locked and cs.canonical_head != cs.checked:
                findings.add(
                    "CANONICAL_ADVANCED",
                    f"{cs.branch} moved on since the lock ({_short(cs.checked)} -> {_short(cs.canonical_head)}); "
                    "the locked commit is what was checked",
                    severity=Severity.info,
                    component=name,
                    commit=cs.canonical_head,
                )
            if cs.locked:
                for cc in cs.locked.canonical_commits:
                    if cs.mirror.published_by(cc.commit) is None:
                        findings.add("UNPUBLISHED_COMMIT", f"already-canonical commit {cc.given} is not reachable from any ref", component=name, commit=cc.commit)


class PlannedPRsMerged:
    name = "planned-prs-merged"

    def run(self, ctx: PlanContext, findings: Findings) -> None:
        for name, cs in ctx.components.items():
            if cs.history is None:
                continue
            for planned in cs.comp.merge_plan:
                if planned.pr not in cs.heads:
                    findings.add("PR_MISSING", f"no refs/pull/{planned.pr}/head on {cs.mirror.url} and none in the lock", component=name, pr=planned.pr)
                    _mark(cs, planned.pr, "planned", "PR_MISSING")
                    continue
                st = cs.states[planned.pr]
                if st.merged:
                    continue
                if st.present:
                    findings.add(
                        "PR_PARTIALLY_MERGED",
                        f"{len(st.present)} of {len(st.present) + len(st.missing)} commits of PR #{planned.pr} are on {cs.branch}; "
                        f"missing: {', '.join(_short(c) for c in st.missing[:5])}",
                        component=name,
                        pr=planned.pr,
                    )
                    _mark(cs, planned.pr, "planned", "PR_PARTIALLY_MERGED")
                else:
                    findings.add(
                        "PR_NOT_MERGED",
                        f"PR #{planned.pr} (head {_short(cs.heads[planned.pr])}) is not on {cs.branch}: not an ancestor, "
                        "no patch-equivalent commits, no matching squash commit",
                        component=name,
                        pr=planned.pr,
                    )
                    _mark(cs, planned.pr, "planned", "PR_NOT_MERGED")


class MergeOrder:
    """Landing positions on canonical's first-parent history follow the plan's order and ``after:``."""

    name = "merge-order"

    def run(self, ctx: PlanContext, findings: Findings) -> None:
        for name, cs in ctx.components.items():
            plan = cs.comp.merge_plan
            for j, later in enumerate(plan):
                sj = cs.states.get(later.pr)
                if not sj or not sj.merged or sj.landed_index is None:
                    continue
                explicit = {parse_pr_reference(r, name) for r in later.after}
                inverted = []
                for earlier in plan[:j]:
                    si = cs.states.get(earlier.pr)
                    if si and si.merged and si.landed_index is not None and si.landed_index > sj.landed_index:
                        inverted.append(earlier.pr)
                if inverted:
                    named = [n for n in inverted if any(k.component == name and k.number == n for k in explicit)]
                    detail = f" (its 'after:' names #{', #'.join(map(str, named))})" if named else ""
                    findings.add(
                        "MERGED_OUT_OF_ORDER",
                        f"PR #{later.pr} landed at {_short(sj.landed_at)} before #{', #'.join(map(str, inverted))}, "
                        f"which the plan merges first{detail}",
                        component=name,
                        pr=later.pr,
                    )
                    _mark(cs, later.pr, "planned", "MERGED_OUT_OF_ORDER")
                for key in explicit:
                    target = ctx.components.get(key.component)
                    if target is None:
                        continue
                    st = target.states.get(key.number)
                    if st is None or not st.merged:
                        findings.add(
                            "AFTER_VIOLATED",
                            f"PR #{later.pr} is merged but {key}, which it must land after, is not",
                            component=name,
                            pr=later.pr,
                        )
                        _mark(cs, later.pr, "planned", "AFTER_VIOLATED")
                    elif key.component == name and key.number not in {p.pr for p in plan[:j]}:
                        # A same-repository target outside the earlier plan entries (an already-canonical PR).
                        if st.landed_index is not None and st.landed_index > sj.landed_index:
                            findings.add(
                                "AFTER_VIOLATED",
                                f"PR #{later.pr} landed at {_short(sj.landed_at)} before #{key.number}, which it must land after",
                                component=name,
                                pr=later.pr,
                            )
                            _mark(cs, later.pr, "planned", "AFTER_VIOLATED")
                    elif key.component != name:
                        # Different repositories share no history: compare when each landing commit was made.
                        mine, theirs = cs.landed_time(later.pr), target.landed_time(key.number)
                        if mine is not None and theirs is not None and mine < theirs:
                            findings.add(
                                "AFTER_VIOLATED",
                                f"PR #{later.pr} landed at {mine} (committer time) before {key} landed at {theirs}",
                                component=name,
                                pr=later.pr,
                            )
                            _mark(cs, later.pr, "planned", "AFTER_VIOLATED")


class SupersededAbsent:
    """Superseded and closed PRs are not on canonical, by ancestry or by any patch-equivalent copy."""

    name = "superseded-absent"

    def run(self, ctx: PlanContext, findings: Findings) -> None:
        for name, cs in ctx.components.items():
            for st in cs.statuses:
                if st.role not in ("superseded", "closed") or st.state != "present" or st.pr is None:
                    continue
                code = "SUPERSEDED_PR_MERGED" if st.role == "superseded" else "CLOSED_PR_MERGED"
                ms = cs.states.get(-st.pr)
                how = ms.how if ms and ms.how else "patch-id (some commits)"
                findings.add(code, f"{st.role} PR #{st.pr} is on {cs.branch} ({how}, landed at {_short(st.landed_at)})", component=name, pr=st.pr)
                st.codes.append(code)


class AlreadyCanonicalPresent:
    name = "already-canonical-present"

    def run(self, ctx: PlanContext, findings: Findings) -> None:
        for name, cs in ctx.components.items():
            for st in cs.statuses:
                if st.role == "already_canonical" and st.state not in ("merged", "present"):
                    what = f"PR #{st.pr}" if st.pr is not None else f"commit {st.commit}"
                    findings.add("ALREADY_CANONICAL_MISSING", f"{what} is listed as already canonical but is not on {cs.branch}", component=name, pr=st.pr, commit=st.commit)
                    st.codes.append("ALREADY_CANONICAL_MISSING")


class ExclusionsAbsent:
    """An excluded change (by PR, commit, path glob or subject pattern) does not appear."""

    name = "exclusions-absent"

    def run(self, ctx: PlanContext, findings: Findings) -> None:
        for excl in ctx.loaded.manifest.exclusions:
            targets = [ctx.components[excl.component]] if excl.component in ctx.components else (
                [] if excl.component else list(ctx.components.values())
            )
            for cs in targets:
                if cs.history is None:
                    continue
                for hit in _exclusion_hits(cs, excl, len(ctx.components) == 1):
                    findings.add("EXCLUDED_CHANGE_PRESENT", f"exclusion '{excl.id}' ({excl.description}): {hit}", component=cs.name, pr=excl.pr)


def _exclusion_hits(cs: ComponentState, excl: Exclusion, single_component: bool) -> list[str]:
    assert cs.history is not None
    git, hist = cs.mirror.git, cs.history
    hits: list[str] = []
    # A PR number names a PR of one repository: without 'component' it is checked only when
    # the manifest has a single git component.
    pr_applies = excl.component is not None or single_component
    if excl.pr is not None and pr_applies:
        head = cs.mirror.pr_head(excl.pr)
        if head:
            st = hist.state_of(head)
            if st.merged or st.present:
                hits.append(f"PR #{excl.pr} is on {cs.branch} ({st.how or 'some commits'})")
    for prefix in excl.commits:
        if not cs.mirror.has_commit(prefix):
            continue
        full = cs.mirror.resolve(prefix)
        if hist.contains(full):
            hits.append(f"commit {prefix} is in the history of {cs.branch}")
            continue
        pid = patch_ids(git, full, f"^{full}^") if len(git.run("rev-list", "--parents", "-n1", full).split()) == 2 else {}
        if pid and any(hist.equivalents(p) for p in pid.values()):
            hits.append(f"a copy of commit {prefix} is on {cs.branch}")
    if excl.paths:
        files = git.run("ls-tree", "-r", "--name-only", "--full-tree", cs.checked).splitlines()
        for pattern in excl.paths:
            matched = [f for f in files if fnmatch.fnmatchcase(f, pattern)]
            if matched:
                hits.append(f"path {matched[0]} matches '{pattern}'" + (f" (+{len(matched) - 1} more)" if len(matched) > 1 else ""))
    if excl.message_pattern:
        regex = re.compile(excl.message_pattern)
        for sha, subject in hist.range_subjects():
            if regex.search(subject):
                hits.append(f"commit {_short(sha)} '{subject}' matches /{excl.message_pattern}/")
    return hits


class PRHeadsUnmoved:
    """Every PR head recorded in the lock is still where ``refs/pull/N/head`` points."""

    name = "pr-heads-unmoved"

    def run(self, ctx: PlanContext, findings: Findings) -> None:
        for name, cs in ctx.components.items():
            if cs.locked is None:
                continue
            for lpr in cs.locked.pull_requests:
                now = cs.mirror.pr_head(lpr.number)
                if now is None:
                    if lpr.role == "planned":
                        findings.add("PR_HEAD_GONE", f"{lpr.ref} no longer exists (locked at {_short(lpr.head)})", severity=Severity.warning, component=name, pr=lpr.number)
                elif now != lpr.head:
                    findings.add(
                        "PR_HEAD_MOVED",
                        f"{lpr.ref} moved from {_short(lpr.head)} (locked) to {_short(now)}",
                        severity=Severity.error if lpr.role in ("planned", "already_canonical") else Severity.warning,
                        component=name,
                        pr=lpr.number,
                    )
                    _mark(cs, lpr.number, lpr.role, "PR_HEAD_MOVED")


CHECKS: list[Check] = [
    CheckedCommitPublished(),
    PlannedPRsMerged(),
    MergeOrder(),
    SupersededAbsent(),
    AlreadyCanonicalPresent(),
    ExclusionsAbsent(),
    PRHeadsUnmoved(),
]


# --- building the state ------------------------------------------------------------------


def _status_from(cs: ComponentState, pr: int, role: str, title: str | None, head: str | None, st: MergeState | None) -> PRStatus:
    if head is None or st is None:
        return PRStatus(component=cs.name, pr=pr, role=role, title=title, head=head, state="unknown")  # type: ignore[arg-type]
    if role in ("superseded", "closed", "excluded"):
        state = "present" if (st.merged or st.present) else "absent"
    else:
        state = "merged" if st.merged else ("partial" if st.present else "not-merged")
    if st.landed_at and st.landed_at not in cs.times:
        cs.times.update({c: t for c, (t, _) in commit_info(cs.mirror.git, [st.landed_at]).items()})
    return PRStatus(
        component=cs.name,
        pr=pr,
        role=role,  # type: ignore[arg-type]
        title=title,
        head=head,
        state=state,  # type: ignore[arg-type]
        how=st.how,
        landed_at=st.landed_at,
        landed_position=st.landed_index,
        landed_time=cs.times.get(st.landed_at) if st.landed_at else None,
    )


def _superseder_patches(cs: ComponentState, superseder: int) -> tuple[frozenset[str], str | None]:
    """Patch-ids a superseding PR brought (so a superseded PR's identical commits are not blamed), and its head."""
    head = cs.heads.get(superseder)
    if head is None:
        return frozenset(), None
    git = cs.mirror.git
    st = cs.states.get(superseder)
    stop = f"{st.landed_at}^" if st and st.how == "ancestry" and st.landed_at else cs.checked
    own = patch_ids(git, head, f"^{stop}")
    base = merge_base(git, head, stop)
    squash = {diff_patch_id(git, base, head)} if base else set()
    return frozenset(own.values()) | frozenset(squash), head


def build_state(name: str, comp: GitComponent, mirror: Mirror, locked: LockedGitComponent | None) -> ComponentState:
    branch = (locked.canonical_branch if locked else None) or comp.canonical_branch or mirror.default_branch()
    canonical_head = mirror.branch_head(branch)
    if locked:
        checked = locked.commit
    elif comp.commit and comp.commit != TO_BE_LOCKED:
        checked = comp.commit
    else:
        checked = canonical_head
    cs = ComponentState(name, comp, mirror, locked, branch, canonical_head, checked)
    if not mirror.has_commit(checked):
        return cs
    cs.history = CanonicalHistory(mirror.git, checked)
    locked_heads = {p.number: p.head for p in (locked.pull_requests if locked else [])}
    superseded_by: dict[int, int | None] = {}
    for entry in comp.merge_plan:
        for s in entry.supersedes:
            superseded_by[s] = entry.pr
    for change in comp.already_canonical:
        for s in change.supersedes:
            superseded_by.setdefault(s, change.pr)
    named: list[tuple[int, str, str | None]] = [(p.pr, "planned", p.title) for p in comp.merge_plan]
    named += [(c.pr, "already_canonical", c.title) for c in comp.already_canonical if c.pr is not None]
    named += [(c.pr, "closed", c.title) for c in comp.closed]
    named += [(s, "superseded", None) for s in sorted(superseded_by) if s not in {c.pr for c in comp.closed}]
    remote_heads = mirror.refs("refs/pull/")
    for pr, role, _ in named:
        # The planned head is the locked one (what was reviewed); a moved head is its own finding.
        head = locked_heads.get(pr) if role == "planned" else None
        head = head or remote_heads.get(f"refs/pull/{pr}/head") or locked_heads.get(pr)
        if head:
            cs.heads[pr] = head
    cs.history.prepare(list(cs.heads.values()))
    pending: list[tuple[int, str, str | None, str | None, MergeState | None]] = []
    for pr, role, title in named:
        head = cs.heads.get(pr)
        if head is None:
            pending.append((pr, role, title, None, None))
            continue
        if role in ("planned", "already_canonical"):
            st = cs.history.state_of(head)
            cs.states[pr] = st
        else:
            ignore, sup_head = frozenset(), None
            sup = superseded_by.get(pr)
            if sup is not None:
                ignore, sup_head = _superseder_patches(cs, sup)
            if sup_head and is_ancestor(mirror.git, head, sup_head):
                st = MergeState(False)  # carried inside the superseding PR: not a separate merge
            else:
                st = cs.history.state_of(head, ignore_patches=ignore)
            cs.states[-pr] = st  # negative keys: superseded/closed, never planned
        pending.append((pr, role, title, head, st))
    landed = [st.landed_at for *_, st in pending if st is not None and st.landed_at]
    cs.times.update({c: t for c, (t, _) in commit_info(mirror.git, landed).items()})
    for pr, role, title, head, st in pending:
        cs.statuses.append(_status_from(cs, pr, role, title, head, st))
    for change in comp.already_canonical:
        if change.commit is None:
            continue
        present = mirror.has_commit(change.commit) and cs.history.contains(mirror.resolve(change.commit))
        if not present and mirror.has_commit(change.commit):
            full = mirror.resolve(change.commit)
            present = any(cs.history.equivalents(p) for p in patch_ids(mirror.git, full, f"^{full}^").values())
        cs.statuses.append(
            PRStatus(component=name, commit=change.commit, role="already_canonical", title=change.title, state="present" if present else "absent")
        )
    return cs


def _release_only(cs: ComponentState, ref: str) -> ReleaseOnlyReport:
    """Release-only commits of ``ref`` against the checked commit, with this plan's ``carries:``."""
    carried = {
        prefix: planned.pr
        for planned in cs.comp.merge_plan
        if planned.pr in cs.states and cs.states[planned.pr].merged
        for prefix in planned.carries
    }
    return find_release_only(
        cs.mirror.git,
        cs.mirror.resolve(ref),
        cs.checked,
        repo=cs.mirror.url,
        release_name=ref,
        canonical_name=f"{cs.branch}@{cs.checked[:12]}",
        carried=carried,
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
    findings = Findings()
    for name in releases or {}:
        if name not in loaded.manifest.git_components():
            raise InputError(f"--release names {name!r}, which is not a git component of the manifest")
    if lock is not None and lock.manifest.sha256 != loaded.sha256:
        findings.add(
            "LOCK_MANIFEST_MISMATCH",
            f"the lock was made from manifest sha256 {lock.manifest.sha256[:12]}…, this manifest is {loaded.sha256[:12]}…",
        )
    components: dict[str, ComponentState] = {}
    for name, comp in loaded.manifest.git_components().items():
        mirror = open_mirror(comp, loaded, cache_dir=cache_dir, allow_local=allow_local, fetch=fetch)
        locked = lock.git_components().get(name) if lock else None
        components[name] = build_state(name, comp, mirror, locked)
    ctx = PlanContext(loaded, lock, components)
    for check in CHECKS:
        check.run(ctx, findings)
    reports = [_release_only(components[name], ref) for name, ref in (releases or {}).items()]
    for report, name in zip(reports, releases or {}, strict=True):
        for finding in report.findings:
            finding.location.component = name
            findings.findings.append(finding)
    pins = audit_pins(loaded.manifest, pins_repo) if pins_repo is not None else None
    if pins is not None:
        findings.extend(pins.findings)
    return PlanCheckResult(
        release_only=reports,
        pins=pins,
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
                statuses=cs.statuses,
            )
            for cs in components.values()
        ],
        findings=findings,
    )
