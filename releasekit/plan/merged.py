"""Is a pull request on the canonical branch, and where did it land?

Merged means any of (seed 003, issue 3):
- its head is an ancestor of canonical (merge commit or fast-forward);
- every commit of it has a patch-id-equivalent commit on canonical (rebase merge, cherry-picks);
- one canonical commit's patch-id equals that of the PR's combined diff
  ``merge-base(head, canonical)..head`` (squash merge).

"Where it landed" is the first-parent commit of canonical that brought the change in,
so order checks compare positions in the branch's own history, not commit dates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from releasekit.git.history import (
    EMPTY_PATCH,
    Landing,
    diff_patch_id,
    landing_map,
    merge_base,
    parents_of,
    patch_ids,
)
from releasekit.git.runner import Git
from releasekit.records.plan_check import MergeHow


@dataclass
class MergeState:
    merged: bool
    how: MergeHow | None = None
    landed_index: int | None = None
    landed_at: str | None = None
    # PR commits (patch-ids) with an equivalent on canonical, and those without.
    present: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    patch_ids: dict[str, str] = field(default_factory=dict)  # PR commit -> patch-id

    @property
    def partially_present(self) -> bool:
        return not self.merged and bool(self.present)


class CanonicalHistory:
    """The history of one canonical commit, read once, queried per PR."""

    def __init__(self, git: Git, tip: str) -> None:
        self.git = git
        self.tip = tip
        self.landing: Landing = landing_map(git, tip)
        self._by_patch: dict[str, list[str]] | None = None
        self._revs: list[str] | None = None
        self._own: dict[str, dict[str, str]] = {}

    def prepare(self, heads: list[str]) -> None:
        """Read canonical's patch-ids once, far enough back to cover every PR's fork point.

        The octopus merge-base of canonical and every head is an ancestor of each PR's own
        fork point, so one range from it covers them all (one process, not one per PR).
        """
        unique = list(dict.fromkeys(heads))
        oldest = merge_base(self.git, self.tip, *unique) if unique else None
        if oldest is None and unique:
            # Some head shares no history with canonical (an orphan branch): bound the range by
            # the heads that do, never by the whole history.
            bases = [b for b in (merge_base(self.git, self.tip, h) for h in unique) if b]
            oldest = (merge_base(self.git, *bases) if len(bases) > 1 else bases[0]) if bases else self.tip
        # No PR to look for: nothing on canonical needs a patch-id.
        revs = [self.tip, f"^{oldest}"] if oldest else ([self.tip] if unique else [self.tip, f"^{self.tip}"])
        by_patch: dict[str, list[str]] = {}
        for commit, pid in patch_ids(self.git, *revs).items():
            by_patch.setdefault(pid, []).append(commit)
        for commits in by_patch.values():
            commits.sort(key=lambda c: self.landing.index.get(c, 1 << 30))
        self._by_patch = by_patch
        self._revs = revs
        # Every PR's own commits (not on canonical) with their patch-ids: one walk, one pipe for all.
        outside = [h for h in unique if not self.contains(h)]
        if outside:
            graph = parents_of(self.git, *outside, f"^{self.tip}")
            pids = patch_ids(self.git, *outside, f"^{self.tip}")
            for head in outside:
                seen: set[str] = set()
                stack = [head]
                while stack:
                    c = stack.pop()
                    if c in seen or c not in graph:
                        continue
                    seen.add(c)
                    stack.extend(graph[c])
                self._own[head] = {c: pids[c] for c in seen if c in pids}

    def range_subjects(self) -> list[tuple[str, str]]:
        """(commit, subject) of every canonical commit in the range ``prepare`` read."""
        # Without a merge plan to bound it, the most recent 1,000 commits.
        revs = (
            self._revs
            if self._revs and len(self._revs) == 2 and self._revs[1] != f"^{self.tip}"
            else [self.tip, "--max-count=1000"]
        )
        out = self.git.run("log", "--format=%H %s", *revs, "--")
        return [(line[:40], line[41:]) for line in out.splitlines() if len(line) >= 40]

    def equivalents(self, pid: str) -> list[str]:
        if self._by_patch is None:
            self.prepare([])
        assert self._by_patch is not None
        return self._by_patch.get(pid, [])

    def contains(self, commit: str) -> bool:
        return self.landing.contains(commit)

    def _landed(self, commit: str) -> tuple[int, str]:
        i = self.landing.index[commit]
        return i, self.landing.chain[i]

    def state_of(self, head: str, *, ignore_patches: frozenset[str] = frozenset()) -> MergeState:
        """Where ``head`` (a PR head) stands on canonical. ``ignore_patches``: patch-ids that do not count."""
        if self.contains(head):
            i, at = self._landed(head)
            return MergeState(True, "ancestry", i, at)
        own = self._own.get(head)
        if own is None:
            own = patch_ids(self.git, head, f"^{self.tip}")
        state = MergeState(False, patch_ids=own)
        landed: list[int] = []
        for commit, pid in own.items():
            if pid == EMPTY_PATCH or pid in ignore_patches:
                continue
            eq = self.equivalents(pid)
            if eq:
                state.present.append(commit)
                landed.append(self.landing.index[eq[0]])
            else:
                state.missing.append(commit)
        if state.present and not state.missing:
            i = max(landed)
            return MergeState(True, "patch-id", i, self.landing.chain[i], state.present, [], own)
        base = merge_base(self.git, head, self.tip) if own else None
        if base:
            pid = diff_patch_id(self.git, base, head)
            if pid != EMPTY_PATCH and pid not in ignore_patches:
                eq = self.equivalents(pid)
                if eq:
                    i, at = self._landed(eq[0])
                    return MergeState(True, "squash", i, at, list(own), [], own)
        return state
