"""``audit release-only``: commits on a release branch whose change is not on canonical.

For a linear release branch this is ``git cherry CANONICAL RELEASE``'s ``+`` lines:
commits of the release side (not reachable from canonical) whose patch-id matches no
commit of the canonical side (not reachable from the release). Across merges:

- a merge commit on the release side is judged by what it adds itself: the tree an
  automatic merge of its two parents would give (``git merge-tree``) against its own
  tree. Equal: it carries nothing of its own, its parents' commits are judged one by
  one. Different (a conflict resolution or an "evil merge"): it is reported as a
  ``merge-resolution`` release-only commit;
- when the whole side branch a merge brought in was squashed onto canonical (the
  merge's diff against its first parent has a patch-equivalent on canonical), the
  commits of that side branch count as canonical too.

A release-only commit named in the ``carries:`` of a PR that is merged on canonical
(the PR re-extracted it, e.g. seed 003's 83925ac7b6 via #97) counts as canonicalised.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.git.history import (
    EMPTY_PATCH,
    cherry,
    diff_patch_id,
    graph_with_subjects,
    patch_id_set,
    patch_ids,
    rev_list,
)
from releasekit.git.runner import Git
from releasekit.git.scratch import merge_tree
from releasekit.records.plan_check import ReleaseOnlyCommit, ReleaseOnlyReport


def _auto_merge_tree(git: Git, first: str, second: str) -> str | None:
    """The tree git's own merge of two commits gives, or None when it conflicts.

    Written into a scratch object directory: the repository read is never written.
    """
    return merge_tree(git, first, second)


def find_release_only(
    git: Git,
    release: str,
    canonical: str,
    *,
    repo: str,
    release_name: str | None = None,
    canonical_name: str | None = None,
    carried: dict[str, int] | None = None,
) -> ReleaseOnlyReport:
    walk = graph_with_subjects(git, release, f"^{canonical}")
    graph = {c: parents for c, (parents, _) in walk.items()}
    singles = [c for c, parents in graph.items() if len(parents) < 2]
    if len(singles) == len(graph):
        # No merges on the release side: git cherry's own answer, in one process (it reads
        # full diffs of the canonical side only where the changed paths could match).
        plus, _ = cherry(git, canonical, release)
        return _report(
            walk, set(plus), set(), set(), release, canonical, repo, release_name, canonical_name, carried
        )
    release_pids = patch_ids(git, release, f"^{canonical}", commits=singles)
    canonical_pids = patch_id_set(git, canonical, f"^{release}")
    # Empty commits give no patch-id line; git cherry counts them equal to any empty canonical
    # commit, so look for one only when the release side has an empty commit.
    if (
        EMPTY_PATCH in release_pids.values()
        and EMPTY_PATCH in patch_ids(git, canonical, f"^{release}").values()
    ):
        canonical_pids.add(EMPTY_PATCH)
    covered: set[str] = set()
    own_merges: list[str] = []
    for commit, parents in graph.items():
        if len(parents) < 2:
            continue
        if len(parents) == 2:
            side_squashed = diff_patch_id(git, parents[0], commit) in canonical_pids
            if side_squashed:
                covered.update(c for c in rev_list(git, parents[1], f"^{parents[0]}") if c in graph)
                covered.add(commit)
                continue
            auto = _auto_merge_tree(git, parents[0], parents[1])
            tree = git.run("rev-parse", f"{commit}^{{tree}}").strip()
            if auto != tree:
                own_merges.append(commit)
        # Octopus merges cannot conflict-resolve (git refuses); they add nothing of their own.
    alone = {c for c, pid in release_pids.items() if pid not in canonical_pids and c not in covered}
    return _report(
        walk, alone, set(own_merges), covered, release, canonical, repo, release_name, canonical_name, carried
    )


def _report(
    walk: dict[str, tuple[list[str], str]],
    alone: set[str],
    own_merges: set[str],
    covered: set[str],
    release: str,
    canonical: str,
    repo: str,
    release_name: str | None,
    canonical_name: str | None,
    carried: dict[str, int] | None,
) -> ReleaseOnlyReport:
    """The report from the release-side walk and the commits found to be release-only."""
    order = list(reversed(walk))  # oldest first, like git cherry
    carried = carried or {}
    findings = Findings()
    result: list[ReleaseOnlyCommit] = []
    equivalent = 0
    for commit in order:
        if commit in alone:
            kind = "commit"
        elif commit in own_merges and commit not in covered:
            kind = "merge-resolution"
        else:
            if len(walk[commit][0]) < 2 or commit in covered:
                equivalent += 1
            continue
        subject = walk[commit][1]
        carrier = next((pr for prefix, pr in carried.items() if commit.startswith(prefix)), None)
        entry = ReleaseOnlyCommit(commit=commit, subject=subject, kind=kind, carried_by=carrier)  # type: ignore[arg-type]
        result.append(entry)
        if carrier is not None:
            findings.add(
                "RELEASE_ONLY_CARRIED",
                f"release-only commit '{subject}' is carried onto canonical by merged PR #{carrier}",
                severity=Severity.info,
                commit=commit,
                pr=carrier,
            )
        else:
            findings.add(
                "RELEASE_ONLY_COMMIT",
                f"{'merge resolution' if kind != 'commit' else 'commit'} '{subject}' is on the release side only: "
                "no patch-equivalent on canonical",
                commit=commit,
            )
    return ReleaseOnlyReport(
        repo=repo,
        release=release_name or release,
        canonical=canonical_name or canonical,
        release_commit=release,
        canonical_commit=canonical,
        examined=len(order),
        equivalent=equivalent,
        release_only=result,
        passed=findings.passed,
        findings=findings,
    )
