"""Fresh, throw-away checkouts of exactly one commit, verified after the fact.

A build must read the tree of the locked commit and nothing else: no leftover files,
no local edits, no other commit. ``fresh_checkout`` makes a new directory, checks the
commit out of a new repository that borrows a mirror's objects, then proves HEAD, the tree and a clean status. Before the checkout,
every object it reads (commit, trees, blobs) is hashed against its name (``git/objects.py``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from releasekit.errors import InputError
from releasekit.git.mirror import Mirror
from releasekit.git.objects import verify_commit_objects
from releasekit.git.private import read_shallow, write_shallow
from releasekit.git.remote import is_hex_sha
from releasekit.git.runner import Git, GitFailed, run_git


class Checkout(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: Path
    repo: str  # public URL of the remote
    commit: str
    tree: str


def fresh_checkout(
    source: Mirror | str,
    commit: str,
    dest: Path,
    *,
    expect_tree: str | None = None,
    cache_dir: Path | None = None,
    allow_local: bool = False,
) -> Checkout:
    """Check out ``commit`` (a full SHA) into ``dest``, which must not exist or be empty.

    ``source`` is a Mirror (used as it is if it already has the commit, else updated) or a
    repository URL (mirrored into ``cache_dir`` first). With ``expect_tree`` the checkout
    is refused (InputError) unless the commit's tree is exactly that one. The work tree
    has no remote configured: it is a snapshot, not a clone to push from.
    """
    if not (len(commit) == 40 and is_hex_sha(commit)):
        raise InputError(f"fresh_checkout needs a full 40-hex commit SHA, got {commit!r}")
    mirror = source if isinstance(source, Mirror) else Mirror(source, cache_dir, allow_local=allow_local)
    if not mirror.exists() or not mirror.has_commit(commit):
        mirror.update()
    if not mirror.has_commit(commit):
        raise InputError(f"{mirror.url}: commit {commit} does not exist on the remote")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InputError(f"checkout destination {dest} exists and is not empty")
    created = not dest.exists()
    try:
        # A new repository (its config written by this process) that borrows the mirror's checked
        # object directories: no git process runs in the mirror, nothing is copied, no remote is set.
        run_git(["init", "--quiet", str(Path(os.path.abspath(dest)))])
        listing = "".join(f"{d}\n" for d in mirror.object_dirs())
        (dest / ".git" / "objects" / "info" / "alternates").write_text(listing, encoding="utf-8")
        work = Git(dest)
        # A commit read from a history-less bundle is a shallow root of the mirror (git/bundle.py).
        # The roots the mirror's private repository kept (git/private.py: true_roots), never its file.
        write_shallow(dest / ".git", read_shallow(mirror.git.directory, mirror.url))
        # git reads loose objects without checking their hash; the mirror may be another process's.
        verify_commit_objects(work, commit)
        work.run("-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit, "--")
        head = work.run("rev-parse", "HEAD").strip()
        tree = work.run("rev-parse", "HEAD^{tree}").strip()
        if head != commit:
            raise InputError(f"checkout of {commit} ended at {head}")
        if expect_tree is not None and tree != expect_tree:
            raise InputError(f"{mirror.url}@{commit[:12]}: tree is {tree}, the lock expects {expect_tree}")
        dirty = work.run("status", "--porcelain", "--untracked-files=all", "--ignored")
        if dirty.strip():
            raise InputError(f"checkout of {commit[:12]} is not clean: {dirty.splitlines()[0]}")
    except (InputError, GitFailed) as exc:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        else:
            for child in dest.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        if isinstance(exc, GitFailed):
            raise InputError(f"cannot check out {mirror.url}@{commit[:12]}: {exc}") from None
        raise
    return Checkout(path=dest, repo=mirror.url, commit=head, tree=tree)
