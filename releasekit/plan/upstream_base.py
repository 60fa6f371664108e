"""The upstream a fork follows (a git component's ``upstream:``), read for the release-only audit.

In a mirror (releasekit's own cache) the upstream branch is read under
``refs/releasekit/upstream-base/<hash of the URL>/<ref>`` through the one door
(``git/mirror.py: fetch_refs``): from the upstream's ``--mirror``/``RELEASEKIT_MIRRORS`` copy when
it has one, else fetched from its URL (refused offline); a fork shares upstream's history, so
little moves. ``ref`` may be a branch, a full ref or a full commit id. A repository read in place is never written: the upstream
URL's mirror copy names the commit (read as data) when it has one, else the repository's own
remote-tracking branch for that URL (``refs/remotes/<remote>/<ref>``, e.g. ``upstream/main``)
is used. When neither gives a commit, the reason is returned and the audit runs
without an upstream (``RELEASE_UPSTREAM_UNREAD``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from releasekit import atomic
from releasekit.errors import InputError
from releasekit.git.mirror import fetch_refs
from releasekit.git.mirrors import mirror_for
from releasekit.git.private import THEIR_CONFIG, check_git_dir, git_dir_of, read_refs
from releasekit.git.remote import check_ref, check_remote
from releasekit.git.runner import Git, GitFailed
from releasekit.manifest.models import UpstreamBase
from releasekit.plan.release_only import Upstream

_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")


def _same_url(a: str, b: str) -> bool:
    def norm(url: str) -> str:
        url = url.strip().rstrip("/")
        return url[: -len(".git")] if url.endswith(".git") else url

    return norm(a) == norm(b)


def _verify(git: Git, ref: str) -> str | None:
    out = git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
    return out.strip() or None


def read_upstream_base(
    git: Git,
    base: UpstreamBase,
    *,
    mirror_path: Path | None,
    allow_local: bool,
    base_dir: Path | None,
    fetch: bool,
) -> tuple[Upstream | None, str | None]:
    """(the upstream's commit, None) or (None, why it could not be read).

    ``mirror_path``: the component's mirror, which may be fetched into; None for a
    repository read in place (never written).
    """
    check_ref(base.ref)
    if _FULL_SHA.match(base.ref) or base.ref.startswith("refs/"):
        branch = base.ref
    else:
        branch = f"refs/heads/{base.ref}"
    why: str | None = None
    if mirror_path is not None:
        slug = hashlib.sha256(base.repo.encode()).hexdigest()[:16]
        dest = f"refs/releasekit/upstream-base/{slug}/{base.ref.removeprefix('refs/heads/')}"
        if fetch:
            try:
                remote = check_remote(base.repo, allow_local=allow_local, base_dir=base_dir)
                # In the mirror's private repository, never in the cache entry (git/private.py).
                with atomic.entry_lock(mirror_path):
                    fetch_refs(mirror_path, git.label, remote, {branch: dest})
            except (InputError, GitFailed) as exc:
                text = exc.stderr if isinstance(exc, GitFailed) else str(exc)
                why = (text.strip().splitlines() or ["fetch failed"])[-1]
        commit = _verify(git, dest)
        if commit:
            return Upstream(base.repo, base.ref, commit), None
        return None, why or f"{base.ref} of {base.repo} was never fetched (--no-fetch)"
    return _in_place(git, base, branch)


def _in_place(git: Git, base: UpstreamBase, branch: str) -> tuple[Upstream | None, str | None]:
    """The upstream of a repository read in place (never written): from the upstream URL's
    ``--mirror``/``RELEASEKIT_MIRRORS`` copy when it has one (its ref read as data, the commit
    looked up in the repository), else from the repository's own remote-tracking branch for that URL."""
    local = mirror_for(base.repo)
    if local is not None:
        return _from_mirror_copy(git, base, branch, local)
    # The repository's own configuration, copied as data (git/private.py: read_in_place).
    theirs = git.directory / THEIR_CONFIG
    where = ("--file", str(theirs)) if theirs.is_file() else ()
    remotes = git.run("config", *where, "--get-regexp", r"^remote\..*\.url$", check=False)
    for line in remotes.splitlines():
        key, _, url = line.partition(" ")
        name = key[len("remote.") : -len(".url")]
        if _same_url(url, base.repo):
            commit = _verify(git, f"refs/remotes/{name}/{base.ref.removeprefix('refs/heads/')}")
            if commit:
                return Upstream(base.repo, base.ref, commit), None
    return None, (
        f"the repository has no remote-tracking branch {base.ref} of {base.repo} "
        "(add that remote and fetch it, or give --upstream REV)"
    )


def _from_mirror_copy(
    git: Git, base: UpstreamBase, branch: str, local: Path
) -> tuple[Upstream | None, str | None]:
    where = f"{local} (mirror of {base.repo})"
    try:
        gitdir = git_dir_of(local, where)
        check_git_dir(gitdir, where)  # before anything there is opened: a FIFO would hang the reader
        sha = branch if _FULL_SHA.match(branch) else read_refs(gitdir, where).get(branch)
    except InputError as exc:
        return None, str(exc)
    if not sha:
        return None, f"{where} has no {branch}"
    commit = _verify(git, sha)
    if commit:
        return Upstream(base.repo, base.ref, commit), None
    return None, f"{base.ref} of {base.repo} is {sha} in {where}, a commit the repository read in place lacks"
