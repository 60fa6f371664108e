"""``audit release-only``: commits on a release branch whose change is not on canonical.

For a linear release branch this is ``git cherry CANONICAL RELEASE``'s ``+`` lines:
commits of the release side (not reachable from canonical) whose patch-id matches no
commit of the canonical side (not reachable from the release). Git computes it
(``git cherry``, one process): it compares full diffs only of canonical commits whose
changed paths could match. Across merges:

- a merge commit on the release side is judged by what it adds itself: the tree an
  automatic merge of its two parents would give (``git merge-tree``) against its own
  tree. Equal: it carries nothing of its own, its parents' commits are judged one by
  one. Different (a conflict resolution or an "evil merge"): it is reported as a
  ``merge-resolution`` release-only commit;
- when the whole side branch a merge brought in was squashed onto canonical (the
  merge's diff against its first parent has a patch-equivalent on canonical), the
  commits of that side branch count as canonical too.

With an upstream (a fork's upstream branch, vLLM's ``main``): release-side commits
reachable from it are not release-only. They are counted once, with the release-side
commits they came in through (an upstream merge, or the upstream commit a branch was
started on), as the release being based on a different upstream than canonical; only
the fork's own commits and merge resolutions are judged one by one (``git cherry
CANONICAL RELEASE UPSTREAM``).

A release-only commit named in the ``carries:`` of a PR that is merged on canonical
(the PR re-extracted it, e.g. seed 003's 83925ac7b6 via #97) counts as canonicalised.
"""

from __future__ import annotations

from dataclasses import dataclass

from releasekit.findings import Findings, Severity
from releasekit.git.history import (
    CHANGED_PATHS,
    COMMITS_CHANGED_PATHS,
    GRAPH_WITH_TREES,
    Pending,
    cherry_args,
    diff_patch_id,
    parse_cherry,
    parse_commits_changed_paths,
    parse_graph_with_trees,
    patch_id_set,
    rev_list,
)
from releasekit.git.runner import Git, GitFailed
from releasekit.git.scratch import scratch_objects
from releasekit.records.release_only import (
    ReleaseOnlyCommit,
    ReleaseOnlyReport,
    UpstreamEntry,
    UpstreamOrigin,
)


@dataclass(frozen=True)
class Upstream:
    """The upstream a fork follows, resolved: ``commit`` is read from ``repo``'s ``ref``."""

    repo: str
    ref: str
    commit: str


@dataclass(frozen=True)
class _ReleaseSide:
    """The release side as walked (release, not canonical), newest first: each commit's parents and
    subject (``walk``; ``trees`` has its tree too), the fork's own commits among them and those that
    came from the upstream, and the two commits compared."""

    walk: dict[str, tuple[list[str], str]]
    trees: dict[str, tuple[list[str], str, str]]
    fork: set[str]
    from_upstream: set[str]
    release: str
    canonical: str


@dataclass(frozen=True)
class _Judged:
    """What judging the release side found: the fork's own commits without a patch-equivalent on
    canonical (git cherry), the merges that add a change of their own, and the commits a squash
    on canonical covers."""

    alone: set[str]
    own_merges: set[str]
    covered: set[str]


def _brought_by(
    walk: dict[str, tuple[list[str], str]], fork: set[str], from_upstream: set[str]
) -> list[UpstreamEntry]:
    """The fork-side commits whose parents are upstream commits, oldest first, each with
    how many upstream commits came in through it and through no older entry."""
    claimed: set[str] = set()
    entries: list[UpstreamEntry] = []
    for commit in reversed(walk):  # oldest first
        if commit not in fork:
            continue
        parents, subject = walk[commit]
        for i, parent in enumerate(parents):
            if parent not in from_upstream:
                continue
            count = 0
            stack = [parent]
            while stack:
                node = stack.pop()
                if node in claimed or node not in from_upstream:
                    continue
                claimed.add(node)
                count += 1
                stack.extend(walk[node][0])
            entries.append(
                UpstreamEntry(
                    commit=commit,
                    subject=subject,
                    via="merge" if i > 0 else "base",
                    upstream_commit=parent,
                    commits=count,
                )
            )
    return entries


MERGES_AT_ONCE = 4  # fork-side merges whose git reads run side by side


def _judge_merges(git: Git, side: _ReleaseSide) -> tuple[set[str], set[str]]:
    """(commits covered by a squash on canonical, merges that add a change of their own).

    A merge bringing in a non-upstream side branch: was that branch taken onto canonical as
    one squash? Full diffs are read only for canonical commits changing exactly the paths
    the merge brings in. Every other merge: does its tree differ from git's automatic
    merge of its parents (a conflict resolution)? Octopus merges cannot conflict-resolve
    (git refuses); they add nothing of their own.
    """
    walk, fork = side.trees, side.fork
    merges = [c for c in walk if c in fork and len(walk[c][0]) == 2]  # walk order: deterministic
    if not merges:
        return set(), set()
    # merge-tree writes trees and blobs: into an object directory of releasekit's own, never
    # into the repository read (git/scratch.py).
    with scratch_objects(git) as scratch_env:
        return _judge_merge_list(git, side, merges, scratch_env)


def _judge_merge_list(
    git: Git, side: _ReleaseSide, merges: list[str], scratch_env: dict[str, str]
) -> tuple[set[str], set[str]]:
    walk, fork, canonical, release = side.trees, side.fork, side.canonical, side.release
    sides = {c for c in merges if walk[c][0][1] not in side.from_upstream}
    canonical_read = Pending(git, *COMMITS_CHANGED_PATHS, canonical, f"^{release}", "--") if sides else None
    canonical_paths: dict[str, frozenset[str]] | None = None
    covered: set[str] = set()
    own: set[str] = set()
    for start in range(0, len(merges), MERGES_AT_ONCE):
        chunk = merges[start : start + MERGES_AT_ONCE]
        brought_reads = {c: Pending(git, *CHANGED_PATHS, walk[c][0][0], c, "--") for c in chunk if c in sides}
        tree_reads = {
            c: Pending(git, "merge-tree", "--write-tree", "--no-messages", *walk[c][0], env=scratch_env)
            for c in chunk
        }
        for commit in chunk:
            first, second = walk[commit][0]
            if commit in brought_reads:
                if canonical_paths is None and canonical_read is not None:
                    canonical_paths = parse_commits_changed_paths(canonical_read.result())
                brought = frozenset(brought_reads[commit].result().splitlines())
                candidates = [
                    c for c, paths in (canonical_paths or {}).items() if brought and paths == brought
                ]
                if candidates and diff_patch_id(git, first, commit) in patch_id_set(
                    git, "--no-walk", *candidates
                ):
                    # The side branch was squashed onto canonical: its commits are canonical too.
                    covered.update(c for c in rev_list(git, second, f"^{first}") if c in fork)
                    covered.add(commit)
                    tree_reads[commit].proc.communicate()
                    continue
            try:
                auto: str | None = tree_reads[commit].result().split()[0]
            except GitFailed:  # the automatic merge conflicts
                auto = None
            if auto != walk[commit][1]:
                own.add(commit)
    return covered, own


def find_release_only(
    git: Git,
    release: str,
    canonical: str,
    *,
    repo: str,
    release_name: str | None = None,
    canonical_name: str | None = None,
    carried: dict[str, int] | None = None,
    upstream: Upstream | None = None,
    upstream_unread: str | None = None,
) -> ReleaseOnlyReport:
    """``upstream_unread``: why the component's upstream could not be read (reported as a warning)."""
    # The independent reads run side by side (each its own git process): the release-side
    # walk; the fork's own non-merge commits without a patch-equivalent on canonical (git
    # cherry, which reads full diffs of the canonical side only where the changed paths
    # could match; commits reachable from the upstream left out); with an upstream, the
    # fork side and canonical's upstream base.
    limit = upstream.commit if upstream is not None else None
    walk_read = Pending(git, *GRAPH_WITH_TREES, release, f"^{canonical}", "--")
    cherry_read = Pending(git, *cherry_args(canonical, release, limit))
    fork_read = base_read = None
    if upstream is not None:
        fork_read = Pending(git, "rev-list", release, f"^{canonical}", f"^{upstream.commit}", "--")
        base_read = Pending(git, "merge-base", canonical, upstream.commit)
    walk_trees = parse_graph_with_trees(walk_read.result())
    walk = {c: (parents, subject) for c, (parents, _tree, subject) in walk_trees.items()}
    fork = set(fork_read.result().split()) if fork_read is not None else set(walk)
    from_upstream = {c for c in walk if c not in fork}
    plus, _ = parse_cherry(cherry_read.result())
    canonical_base: str | None = None
    if base_read is not None:
        try:
            canonical_base = base_read.result().strip() or None
        except GitFailed:  # no common ancestor
            canonical_base = None
    side = _ReleaseSide(walk, walk_trees, fork, from_upstream, release, canonical)
    covered, own_merges = _judge_merges(git, side)
    judged = _Judged({c for c in plus if c not in covered}, own_merges, covered)
    return _report(
        side,
        judged,
        _origin(upstream, canonical_base, side),
        repo=repo,
        release_name=release_name,
        canonical_name=canonical_name,
        carried=carried,
        upstream_unread=upstream_unread,
    )


def _origin(
    upstream: Upstream | None, canonical_base: str | None, side: _ReleaseSide
) -> UpstreamOrigin | None:
    """What the upstream brought and which merges brought it; None without an upstream to compare with."""
    if upstream is None:
        return None
    from_upstream = side.from_upstream
    return UpstreamOrigin(
        repo=upstream.repo,
        ref=upstream.ref,
        commit=upstream.commit,
        canonical_base=canonical_base if from_upstream else None,
        commits=len(from_upstream),
        brought_by=_brought_by(side.walk, side.fork, from_upstream),
    )


def _upstream_message(origin: UpstreamOrigin, release: str) -> str:
    ways = "; ".join(
        f"{e.commits} through {'merge' if e.via == 'merge' else 'the upstream base of'} "
        f"{e.commit[:12]} '{e.subject}' (upstream {e.upstream_commit[:12]})"
        for e in origin.brought_by
    )
    base = f" (canonical's upstream base is {origin.canonical_base[:12]})" if origin.canonical_base else ""
    return (
        f"{release} is based on a different upstream than canonical{base}: {origin.commits} commits of "
        f"{origin.repo} {origin.ref} that canonical lacks came in: {ways}; they are not release-only"
    )


def _report(
    side: _ReleaseSide,
    judged: _Judged,
    origin: UpstreamOrigin | None,
    *,
    repo: str,
    release_name: str | None,
    canonical_name: str | None,
    carried: dict[str, int] | None,
    upstream_unread: str | None,
) -> ReleaseOnlyReport:
    """The report from the release-side walk and the commits found to be release-only.

    Findings are grouped by origin: the upstream base difference once (first), then the
    fork's own commits and merge resolutions one by one, oldest first.
    """
    release, canonical = side.release, side.canonical
    order = list(reversed(side.walk))  # oldest first, like git cherry
    findings = Findings()
    _upstream_findings(findings, origin, upstream_unread, release_name or release)
    result, equivalent = _classify(order, side, judged, carried or {})
    _commit_findings(findings, result)
    return ReleaseOnlyReport(
        repo=repo,
        release=release_name or release,
        canonical=canonical_name or canonical,
        release_commit=release,
        canonical_commit=canonical,
        examined=len(order),
        equivalent=equivalent,
        release_only=result,
        upstream=origin,
        passed=findings.passed,
        findings=findings,
    )


def _upstream_findings(
    findings: Findings, origin: UpstreamOrigin | None, upstream_unread: str | None, release: str
) -> None:
    """The upstream is said once, before the commits: its difference is one base move, not many commits."""
    if upstream_unread:
        findings.add(
            "RELEASE_UPSTREAM_UNREAD",
            f"the upstream could not be read, so its commits are judged one by one: {upstream_unread}",
            severity=Severity.warning,
        )
    if origin is not None and origin.commits:
        where = next((e for e in reversed(origin.brought_by) if e.via == "merge"), None) or (
            origin.brought_by[-1] if origin.brought_by else None
        )
        findings.add(
            "RELEASE_UPSTREAM_BASE",
            _upstream_message(origin, release),
            severity=Severity.warning,
            commit=where.commit if where else None,
        )


def _classify(
    order: list[str], side: _ReleaseSide, judged: _Judged, carried: dict[str, int]
) -> tuple[list[ReleaseOnlyCommit], int]:
    """(release-only commits, the count found equivalent): only the fork's own changes are release-only."""
    walk, fork = side.walk, side.fork
    alone, own_merges, covered = judged.alone, judged.own_merges, judged.covered
    result: list[ReleaseOnlyCommit] = []
    equivalent = 0
    for commit in order:
        if commit not in fork:
            continue
        if commit in alone:
            kind = "commit"
        elif commit in own_merges and commit not in covered:
            kind = "merge-resolution"
        else:
            if len(walk[commit][0]) < 2 or commit in covered:
                equivalent += 1
            continue
        carrier = next((pr for prefix, pr in carried.items() if commit.startswith(prefix)), None)
        result.append(
            ReleaseOnlyCommit(commit=commit, subject=walk[commit][1], kind=kind, carried_by=carrier)
        )  # type: ignore[arg-type]
    # Grouped by origin: the fork's own commits, then merge resolutions; oldest first in each.
    result.sort(key=lambda c: c.kind != "commit")
    return result, equivalent


def _commit_findings(findings: Findings, result: list[ReleaseOnlyCommit]) -> None:
    """One finding per release-only commit; one a merged PR carries to canonical is info, not a failure."""
    for entry in result:
        if entry.carried_by is not None:
            findings.add(
                "RELEASE_ONLY_CARRIED",
                f"release-only commit '{entry.subject}' is carried onto canonical by merged PR #{entry.carried_by}",
                severity=Severity.info,
                commit=entry.commit,
                pr=entry.carried_by,
            )
        elif entry.kind == "commit":
            findings.add(
                "RELEASE_ONLY_COMMIT",
                f"commit '{entry.subject}' is on the release side only: no patch-equivalent on canonical",
                commit=entry.commit,
            )
        else:
            findings.add(
                "RELEASE_ONLY_COMMIT",
                f"merge resolution '{entry.subject}' is on the release side only: its tree is not git's "
                "automatic merge of its parents (a conflict resolution or a change of its own)",
                commit=entry.commit,
            )
