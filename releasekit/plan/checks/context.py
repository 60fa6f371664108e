"""What the plan checks read: the manifest, the lock, and per git component the facts read
from its mirror once (canonical history, PR heads, where each named PR landed).

Everything here is gathered before any check runs; checks only read it. The per-PR
``statuses`` carry no finding codes: ``releasekit.plan.check.statuses_with_codes`` attaches
them from the findings afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from releasekit.git.history import commit_info, diff_patch_id, is_ancestor, merge_base, patch_ids
from releasekit.git.mirror import Mirror
from releasekit.git.scratch import MergeCheck, merge_conflicts
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import TO_BE_LOCKED, GitComponent
from releasekit.plan.carried import CarriedVerdict
from releasekit.plan.content.gather import ComponentContent
from releasekit.plan.merged import CanonicalHistory, MergeState
from releasekit.plan.upstream import UpstreamPatches
from releasekit.records.forge import ForgeData
from releasekit.records.lock import Lock, LockedGitComponent
from releasekit.records.plan_check import Arrival, PinAuditResult, PRStatus, ReleaseOnlyReport


def short(sha: str | None) -> str:
    return sha[:12] if sha else "?"


@dataclass(frozen=True)
class ComponentState:
    name: str
    comp: GitComponent
    mirror: Mirror
    locked: LockedGitComponent | None
    branch: str
    canonical_head: str
    checked: str
    history: CanonicalHistory | None = None
    heads: Mapping[int, str] = field(default_factory=dict)  # PR -> head used for the check
    # PR -> merge state; negative keys: superseded/closed PRs, never planned.
    states: Mapping[int, MergeState] = field(default_factory=dict)
    statuses: tuple[PRStatus, ...] = ()  # without codes
    times: Mapping[str, int] = field(default_factory=dict)  # landing commit -> committer time
    # Named PR (planned or already canonical) -> its own commits -> patch-id, and the commit
    # its range stops at (the first parent of its landing merge, else the checked commit).
    pr_patches: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    pr_stops: Mapping[int, str] = field(default_factory=dict)

    def status(self, pr: int, role: str) -> PRStatus | None:
        return next((s for s in self.statuses if s.pr == pr and s.role == role), None)

    def landed_time(self, pr: int) -> int | None:
        st = self.states.get(pr)
        if st and st.landed_at:
            if st.landed_at in self.times:
                return self.times[st.landed_at]
            return commit_info(self.mirror.git, [st.landed_at])[st.landed_at][0]
        return None


@dataclass(frozen=True)
class PlanContext:
    loaded: LoadedManifest
    lock: Lock | None
    components: Mapping[str, ComponentState]
    # (component, report) per ``--release``; the reports' findings name their component.
    release_only: tuple[tuple[str, ReleaseOnlyReport], ...] = ()
    # (component, ref) of a manifest ``release_refs`` entry that the mirror does not have.
    release_missing: tuple[tuple[str, str], ...] = ()
    # One pin audit per component read (``pin_inputs``, ``--pins``, ``--pins-repo``), at its checked commit.
    pins: tuple[PinAuditResult, ...] = ()
    # Every ``carries:`` entry, verified (releasekit.plan.carried).
    carried: tuple[CarriedVerdict, ...] = ()
    # (exclusion id, component) -> the upstream change's commits as read (releasekit.plan.upstream).
    upstream: Mapping[tuple[str, str], UpstreamPatches] = field(default_factory=dict)
    # What the forge says about the named PRs (plan/forge_read.py): read now, or the lock's
    # record where the forge did not answer (``forge_sources``: component -> "forge"|"lock").
    forge: ForgeData | None = None
    forge_sources: Mapping[str, str] = field(default_factory=dict)
    require_forge: bool = False  # --require-forge: a forge check that cannot run is an error
    # Git component -> why its repository or refs could not be read (the others are still checked).
    unreadable: Mapping[str, str] = field(default_factory=dict)
    # Git component -> the content rules' hits in its tree (releasekit.plan.content), when scanned.
    content: Mapping[str, ComponentContent] = field(default_factory=dict)
    # Git component -> planned PR not (wholly) on canonical -> git's merge of its head into the
    # checked commit: the files that conflict, or why git cannot tell (``planned_conflicts``).
    conflicts: Mapping[str, Mapping[int, MergeCheck]] = field(default_factory=dict)


def _status_from(name: str, times: Mapping[str, int], named: _Pending) -> PRStatus:
    """A named PR's status (without its arrival) from its (PR, role, title, head, merge state)."""
    pr, role, title, head, st = named
    if head is None or st is None:
        return PRStatus(component=name, pr=pr, role=role, title=title, head=head, state="unknown")  # type: ignore[arg-type]
    if role in ("superseded", "closed", "excluded"):
        state = "present" if (st.merged or st.present) else "absent"
    else:
        state = "merged" if st.merged else ("partial" if st.present else "not-merged")
    return PRStatus(
        component=name,
        pr=pr,
        role=role,  # type: ignore[arg-type]
        title=title,
        head=head,
        state=state,  # type: ignore[arg-type]
        how=st.how,
        landed_at=st.landed_at,
        landed_position=st.landed_index,
        landed_time=times.get(st.landed_at) if st.landed_at else None,
    )


@dataclass(frozen=True)
class _Canonical:
    """One component's canonical side as read: its mirror, the checked commit and its history."""

    mirror: Mirror
    checked: str
    history: CanonicalHistory


def _superseder_patches(
    canon: _Canonical, heads: Mapping[int, str], states: Mapping[int, MergeState], superseder: int
) -> tuple[frozenset[str], str | None]:
    """Patch-ids a superseding PR brought (so a superseded PR's identical commits are not blamed), and its head."""
    head = heads.get(superseder)
    if head is None:
        return frozenset(), None
    git, checked = canon.mirror.git, canon.checked
    st = states.get(superseder)
    stop = f"{st.landed_at}^" if st and st.how == "ancestry" and st.landed_at else checked
    own = patch_ids(git, head, f"^{stop}")
    base = merge_base(git, head, stop)
    squash = {diff_patch_id(git, base, head)} if base else set()
    return frozenset(own.values()) | frozenset(squash), head


def build_state(
    name: str, comp: GitComponent, mirror: Mirror, locked: LockedGitComponent | None
) -> ComponentState:
    """Read one component's canonical history once and locate every PR and change it names."""
    branch = (locked.canonical_branch if locked else None) or comp.canonical_branch or mirror.default_branch()
    canonical_head = mirror.branch_head(branch)
    if locked:
        checked = locked.commit
    elif comp.commit and comp.commit != TO_BE_LOCKED:
        checked = comp.commit
    else:
        checked = canonical_head
    if not mirror.has_commit(checked):
        return ComponentState(name, comp, mirror, locked, branch, canonical_head, checked)
    history = CanonicalHistory(mirror.git, checked)
    superseded_by = _superseded_by(comp)
    named = _named_prs(comp, superseded_by)
    heads = _pr_heads(mirror, named, locked)
    for pr, head in _reviewed_heads(comp).items():
        # A superseded PR's reviewed head (``superseded: [{pr, head}]``) where the forge's ref is gone.
        if pr not in heads and mirror.has_commit(head):
            heads[pr] = mirror.resolve(head)
    history.prepare(list(heads.values()))
    canon = _Canonical(mirror, checked, history)
    pending, states = _merge_states(canon, named, heads, superseded_by)
    landed = [found.landed_at for *_, found in pending if found is not None and found.landed_at]
    times = {c: t for c, (t, _) in commit_info(mirror.git, landed).items()}
    own_prs = [
        (pr, role) for pr, role, *_ in pending if role in ("planned", "already_canonical") and pr in heads
    ]
    pr_patches, pr_stops = _own_commits(canon, heads, states, [pr for pr, _ in own_prs])
    arrivals = _arrivals(mirror, heads, states, pr_patches, pending)
    statuses = _pr_statuses(name, comp, times, pending, arrivals) + _commit_statuses(
        name, comp, mirror, history
    )
    return ComponentState(
        name,
        comp,
        mirror,
        locked,
        branch,
        canonical_head,
        checked,
        history=history,
        heads=heads,
        states=states,
        statuses=tuple(statuses),
        times=times,
        pr_patches=pr_patches,
        pr_stops=pr_stops,
    )


_Pending = tuple[int, str, str | None, str | None, MergeState | None]


def _superseded_by(comp: GitComponent) -> dict[int, int | None]:
    """Superseded PR -> the PR that carries it; the merge plan's word wins over an already-canonical one's."""
    superseded_by: dict[int, int | None] = {}
    for entry in comp.merge_plan:
        for s in entry.supersedes:
            superseded_by[s] = entry.pr
    for change in comp.already_canonical:
        for s in change.supersedes:
            superseded_by.setdefault(s, change.pr)
    return superseded_by


def _named_prs(comp: GitComponent, superseded_by: dict[int, int | None]) -> list[tuple[int, str, str | None]]:
    """(PR, role, title) for every PR the manifest names, in the manifest's order: planned, canonical, closed, superseded."""
    named: list[tuple[int, str, str | None]] = [(p.pr, "planned", p.title) for p in comp.merge_plan]
    named += [(c.pr, "already_canonical", c.title) for c in comp.already_canonical if c.pr is not None]
    named += [(c.pr, "closed", c.title) for c in comp.closed]
    named += [(s, "superseded", None) for s in sorted(superseded_by) if s not in {c.pr for c in comp.closed}]
    return named


def _reviewed_heads(comp: GitComponent) -> dict[int, str]:
    """Superseded PR -> the head the manifest says was reviewed (``superseded[].head``), where it names one."""
    return {
        old.pr: old.head for entry in comp.merge_plan for old in entry.superseded if old.head != TO_BE_LOCKED
    }


def _pr_heads(
    mirror: Mirror, named: list[tuple[int, str, str | None]], locked: LockedGitComponent | None
) -> dict[int, str]:
    """Each named PR's head: the locked one for a planned PR (what was reviewed), else the remote's."""
    heads: dict[int, str] = {}
    locked_heads = {p.number: p.head for p in (locked.pull_requests if locked else [])}
    remote_heads = mirror.refs("refs/pull/")
    for pr, role, _ in named:
        # The planned head is the locked one (what was reviewed); a moved head is its own finding.
        head = locked_heads.get(pr) if role == "planned" else None
        head = head or remote_heads.get(f"refs/pull/{pr}/head") or locked_heads.get(pr)
        if head:
            heads[pr] = head
    return heads


def _merge_states(
    canon: _Canonical,
    named: list[tuple[int, str, str | None]],
    heads: dict[int, str],
    superseded_by: dict[int, int | None],
) -> tuple[list[_Pending], dict[int, MergeState]]:
    """Each named PR's merge state (also by PR in the second result; negative keys: superseded/closed);
    a superseded PR carried inside its superseder is not merged."""
    mirror, history = canon.mirror, canon.history
    pending: list[_Pending] = []
    states: dict[int, MergeState] = {}
    for pr, role, title in named:
        head = heads.get(pr)
        if head is None:
            pending.append((pr, role, title, None, None))
            continue
        if role in ("planned", "already_canonical"):
            st = history.state_of(head)
            states[pr] = st
        else:
            ignore: frozenset[str] = frozenset()
            sup_head: str | None = None
            sup = superseded_by.get(pr)
            if sup is not None:
                ignore, sup_head = _superseder_patches(canon, heads, states, sup)
            if sup_head and is_ancestor(mirror.git, head, sup_head):
                st = MergeState(False)  # carried inside the superseding PR: not a separate merge
            else:
                st = history.state_of(head, ignore_patches=ignore)
            states[-pr] = st  # negative keys: superseded/closed, never planned
        pending.append((pr, role, title, head, st))
    return pending, states


def _pr_statuses(
    name: str,
    comp: GitComponent,
    times: dict[str, int],
    pending: list[_Pending],
    arrivals: dict[int, tuple[Arrival, int | None]],
) -> list[PRStatus]:
    """One status per named PR, with how it arrived; an arrival inside another PR is acknowledged by arrived_in."""
    statuses: list[PRStatus] = []
    planned_by_pr = {p.pr: p for p in comp.merge_plan}
    for entry in pending:
        pr, role, *_ = entry
        status = _status_from(name, times, entry)
        if role in ("planned", "already_canonical") and pr in arrivals:
            arrival, inside = arrivals[pr]
            acknowledged = planned_by_pr[pr].arrived_in if pr in planned_by_pr else None
            status = status.model_copy(
                update={
                    "arrival": arrival,
                    "arrived_inside": inside,
                    # the manifest's arrived_in, when git agrees (RELEASE.md says so)
                    "arrival_acknowledged": arrival == "inside"
                    and inside is not None
                    and inside == acknowledged,
                }
            )
        statuses.append(status)
    return statuses


def _commit_statuses(
    name: str, comp: GitComponent, mirror: Mirror, history: CanonicalHistory
) -> list[PRStatus]:
    """Already-canonical changes named by commit: present by ancestry or by an equivalent patch (a cherry-pick)."""
    statuses: list[PRStatus] = []
    for change in comp.already_canonical:
        if change.commit is None:
            continue
        present = mirror.has_commit(change.commit) and history.contains(mirror.resolve(change.commit))
        if not present and mirror.has_commit(change.commit):
            full = mirror.resolve(change.commit)
            present = any(history.equivalents(p) for p in patch_ids(mirror.git, full, f"^{full}^").values())
        statuses.append(
            PRStatus(
                component=name,
                commit=change.commit,
                role="already_canonical",
                title=change.title,
                state="present" if present else "absent",
            )
        )
    return statuses


def _own_commits(
    canon: _Canonical, heads: Mapping[int, str], states: Mapping[int, MergeState], prs: list[int]
) -> tuple[dict[int, dict[str, str]], dict[int, str]]:
    """Each PR's own commits with their patch-ids: from its head back to where it forked.

    A PR merged by ancestry stops at the first parent of the merge that brought it (its
    commits are canonical now); any other stops at the checked commit (what ``state_of`` read).
    """
    mirror, checked, history = canon.mirror, canon.checked, canon.history
    patches: dict[int, dict[str, str]] = {}
    stops: dict[int, str] = {}
    for pr in prs:
        head, st = heads[pr], states.get(pr)
        if st is not None and st.how == "ancestry" and st.landed_index is not None:
            # The first-parent chain is oldest first: the commit before the landing is its first parent.
            stop = history.landing.chain[st.landed_index - 1] if st.landed_index > 0 else ""
            patches[pr] = patch_ids(mirror.git, head, f"^{stop}") if stop else patch_ids(mirror.git, head)
        else:
            stop = checked
            patches[pr] = (
                dict(st.patch_ids)
                if st is not None and st.patch_ids
                else patch_ids(mirror.git, head, f"^{stop}")
            )
        stops[pr] = stop
    return patches, stops


def _arrivals(
    mirror: Mirror,
    heads: Mapping[int, str],
    states: Mapping[int, MergeState],
    pr_patches: Mapping[int, Mapping[str, str]],
    pending: list[tuple[int, str, str | None, str | None, MergeState | None]],
) -> dict[int, tuple[Arrival, int | None]]:
    """How each planned or already-canonical PR arrived: its own merge, a squash, a rebase, or inside another's merge."""
    named = [pr for pr, role, *_ in pending if role in ("planned", "already_canonical") and pr in heads]
    landings = {
        states[pr].landed_at for pr in named if pr in states and states[pr].merged and states[pr].landed_at
    }
    parents = _parents(mirror, landings)
    own_merge = _own_merges(named, heads, states, parents)
    arrivals: dict[int, tuple[Arrival, int | None]] = {}
    for pr in named:
        st = states.get(pr)
        if st is None:
            continue
        if not st.merged:
            # Stacked under a PR that was squashed: its commits arrived inside that squash.
            for other in named:
                ot = states.get(other)
                if (
                    other != pr
                    and ot is not None
                    and ot.merged
                    and ot.how == "squash"
                    and heads[pr] in pr_patches.get(other, {})
                ):
                    arrivals[pr] = ("inside", other)
                    break
            continue
        if st.how == "squash":
            arrivals[pr] = ("squash", None)
        elif st.how == "patch-id":
            arrivals[pr] = ("rebase", None)
        elif st.landed_at == heads[pr]:
            arrivals[pr] = ("fast-forward", None)
        elif st.landed_at and heads[pr] in parents.get(st.landed_at, [])[1:]:
            arrivals[pr] = ("merge", None)
        else:
            carrier = own_merge.get(st.landed_at or "")
            arrivals[pr] = ("inside", carrier if carrier != pr else None)
    return arrivals


def _parents(mirror: Mirror, landings: set[str | None]) -> dict[str, list[str]]:
    """Each landing commit's parents, read in one ``git log`` (not one call per PR)."""
    parents: dict[str, list[str]] = {}
    if landings:
        out = mirror.git.run(
            "log", "--no-walk=unsorted", "--format=%H %P", *sorted(c for c in landings if c), "--"
        )
        for line in out.splitlines():
            sha, *rest = line.split()
            parents[sha] = rest
    return parents


def _own_merges(
    named: list[int],
    heads: Mapping[int, str],
    states: Mapping[int, MergeState],
    parents: dict[str, list[str]],
) -> dict[str, int]:
    """Whose own merge each landing commit is: the PR whose head is one of its merged-in parents."""
    own_merge: dict[str, int] = {}
    for pr in named:
        st = states.get(pr)
        if (
            st
            and st.merged
            and st.how == "ancestry"
            and st.landed_at
            and heads[pr] in parents.get(st.landed_at, [])[1:]
        ):
            own_merge[st.landed_at] = pr
    return own_merge


def planned_conflicts(cs: ComponentState) -> dict[int, MergeCheck]:
    """Each planned PR with a head that is not merged: ``git merge-tree --write-tree`` of the checked
    commit and its head (a merged PR's changes are canonical already: nothing is left to conflict)."""
    if cs.history is None:
        return {}
    found: dict[int, MergeCheck] = {}
    for planned in cs.comp.merge_plan:
        head, st = cs.heads.get(planned.pr), cs.states.get(planned.pr)
        if head is not None and st is not None and not st.merged:
            found[planned.pr] = merge_conflicts(cs.mirror.git, cs.checked, head)
    return found
