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
    patch_ids,
    rev_list,
)
from releasekit.git.runner import Git
from releasekit.plan.models import MergeHow


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
        self._range_base: str | None = None

    def prepare(self, heads: list[str]) -> None:
        """Read canonical's patch-ids once, far enough back to cover every PR's fork point."""
        bases = [b for b in (merge_base(self.git, h, self.tip) for h in dict.fromkeys(heads)) if b]
        if bases:
            oldest = merge_base(self.git, *bases) if len(bases) > 1 else bases[0]
            revs = [self.tip, f"^{oldest}"] if oldest else [self.tip]
        else:
            revs = [self.tip]
        by_patch: dict[str, list[str]] = {}
        for commit, pid in patch_ids(self.git, *revs).items():
            by_patch.setdefault(pid, []).append(commit)
        for commits in by_patch.values():
            commits.sort(key=lambda c: self.landing.index.get(c, 1 << 30))
        self._by_patch = by_patch
        self._revs = revs

    def range_subjects(self) -> list[tuple[str, str]]:
        """(commit, subject) of every canonical commit in the range ``prepare`` read."""
        revs = getattr(self, "_revs", [self.tip])
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
        base = merge_base(self.git, head, self.tip)
        if base and rev_list(self.git, head, f"^{base}"):
            pid = diff_patch_id(self.git, base, head)
            if pid != EMPTY_PATCH and pid not in ignore_patches:
                eq = self.equivalents(pid)
                if eq:
                    i, at = self._landed(eq[0])
                    return MergeState(True, "squash", i, at, list(own), [], own)
        return state
