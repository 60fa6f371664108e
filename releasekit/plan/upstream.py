"""The commits of an excluded upstream change, read so plan check can recognise copies of them.

An exclusion's ``upstream`` block names a repository and a PR (and/or commits, patch-ids).
The PR head is fetched into the component's own mirror (a fork shares its history with
upstream, so this moves only the PR's objects) under ``refs/releasekit/upstream/``, with
the upstream default branch to bound the PR's own commits. When the upstream repository
cannot be reached, the patch-ids and commits written in the manifest are still used and
the result says what could not be read.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from releasekit.errors import InputError
from releasekit.git.history import EMPTY_PATCH, merge_base, patch_ids
from releasekit.git.mirror import Mirror, fetch_refs
from releasekit.git.remote import check_remote
from releasekit.git.runner import GitFailed
from releasekit.manifest.models import UpstreamChange


@dataclass(frozen=True)
class UpstreamPatches:
    repo: str
    pr: int | None
    patch_ids: dict[str, str] = field(default_factory=dict)  # patch-id -> the upstream commit (or "manifest")
    unreachable: str | None = None  # why the PR's commits could not be read
    # The repository (its --mirror, or the remote fetched) was read and has no refs/pull/<pr>/head:
    # the number names nothing there (a mistyped number, or a snapshot without that PR's ref).
    absent: bool = False


def _fetch_pr(
    mirror: Mirror,
    change: UpstreamChange,
    pr_ref: str,
    base_ref: str,
    *,
    allow_local: bool,
    base_dir: Path | None,
) -> str | None:
    """Fetch the upstream PR's head (and the remote's HEAD) into the mirror; why not, or None."""
    assert change.pr is not None
    try:
        remote = check_remote(change.repo, allow_local=allow_local, base_dir=base_dir)
        # Through the one door: its --mirror / RELEASEKIT_MIRRORS copy (only these two refs are
        # read, as data), else the URL itself (refused offline).
        with mirror.locked():
            fetch_refs(mirror.path, mirror.url, remote, {f"refs/pull/{change.pr}/head": pr_ref})
            # Without a default branch to bound the PR, its most recent commits are read.
            with contextlib.suppress(GitFailed, InputError):
                fetch_refs(mirror.path, mirror.url, remote, {"HEAD": base_ref})
    except (InputError, GitFailed) as exc:
        return exc.reason if isinstance(exc, GitFailed) else str(exc)
    return None


def _names_nothing(why: str, pr: int) -> bool:
    """Did the repository answer that it has no such PR (rather than not answer at all)?
    A mirror says "<path> has no refs/pull/N/head" (``_fetch_pr``), git's fetch "couldn't find remote ref"."""
    ref = f"refs/pull/{pr}/head"
    return f"has no {ref}" in why or f"couldn't find remote ref {ref}" in why


def read_upstream(
    mirror: Mirror, change: UpstreamChange, *, allow_local: bool, base_dir: Path | None, fetch: bool
) -> UpstreamPatches:
    pids: dict[str, str] = {pid: "manifest" for pid in change.patch_ids}
    for prefix in change.commits:
        if mirror.has_commit(prefix):
            full = mirror.resolve(prefix)
            parents = mirror.git.run("rev-list", "--parents", "-n1", full).split()[1:]
            if len(parents) == 1:
                for pid in patch_ids(mirror.git, full, f"^{parents[0]}").values():
                    pids.setdefault(pid, full)
    if change.pr is None:
        return UpstreamPatches(change.repo, None, pids)
    slug = hashlib.sha256(change.repo.encode()).hexdigest()[:16]
    pr_ref, base_ref = (
        f"refs/releasekit/upstream/{slug}/pull/{change.pr}",
        f"refs/releasekit/upstream/{slug}/HEAD",
    )
    unreachable = (
        _fetch_pr(mirror, change, pr_ref, base_ref, allow_local=allow_local, base_dir=base_dir)
        if fetch
        else None
    )
    head = mirror.git.run("rev-parse", "--verify", "--quiet", f"{pr_ref}^{{commit}}", check=False).strip()
    if not head:
        why = unreachable or f"no refs/pull/{change.pr}/head read from {change.repo}"
        return UpstreamPatches(change.repo, change.pr, pids, why, absent=_names_nothing(why, change.pr))
    base = mirror.git.run("rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}", check=False).strip()
    stop = merge_base(mirror.git, head, base) if base else None
    if stop == head:
        why = f"PR #{change.pr} of {change.repo} is merged there by ancestry: name its commits or patch_ids"
        return UpstreamPatches(change.repo, change.pr, pids, why)
    revs = [head, f"^{stop}"] if stop else [head, "--max-count=500"]
    for commit, pid in patch_ids(mirror.git, *revs).items():
        if pid != EMPTY_PATCH:
            pids.setdefault(pid, commit)
    return UpstreamPatches(change.repo, change.pr, pids, None)
