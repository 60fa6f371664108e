"""Files of one commit, read through git objects: no work tree, nothing written.

``audit pins`` and ``plan check`` read the release inputs of the locked commit this way, so
what they judge is the commit that is built, whatever a work tree happens to hold.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from releasekit.errors import InputError
from releasekit.git.private import read_in_place
from releasekit.git.runner import Git, GitFailed, git_env

# Modes of ``git ls-tree`` that are file contents (symlinks, submodules and trees are not).
_FILE_MODES = ("100644", "100755")


@dataclass(frozen=True)
class WorkTreeState:
    """Where a work tree stands: its HEAD commit and whether ``git status`` is empty."""

    head: str
    clean: bool
    changes: tuple[str, ...]  # the first ``git status --porcelain`` lines when not clean


def resolve_commit(git: Git, rev: str, where: str) -> str:
    """The full SHA of ``rev`` in ``git``'s repository, or one clear line (exit 2)."""
    if rev.startswith("-"):
        raise InputError(f"{where}: {rev!r} is not a revision")
    try:
        return git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}").strip()
    except GitFailed:
        raise InputError(f"{where}: cannot resolve {rev!r} to a commit") from None


def commit_files(git: Git, commit: str) -> list[str]:
    """Every regular file of ``commit``'s tree, repository-relative, sorted (one ``ls-tree``)."""
    out = git.run("ls-tree", "-r", "-z", "--full-tree", commit)
    files: list[str] = []
    for entry in out.split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        mode = meta.split(" ", 1)[0]
        if mode in _FILE_MODES and "\n" not in path:
            files.append(path)
    return sorted(files)


def commit_file_sizes(git: Git, commit: str) -> dict[str, int | None]:
    """Every regular file of ``commit``'s tree with its blob size in bytes (one ``ls-tree -l``),
    so a reader can refuse a large blob before ``cat-file`` streams it. A blob the repository
    lacks (a partial snapshot: git prints its size as ``BAD``) maps to None."""
    out = git.run("ls-tree", "-r", "-l", "-z", "--full-tree", commit)
    sizes: dict[str, int | None] = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) == 4 and fields[0] in _FILE_MODES and "\n" not in path:
            sizes[path] = int(fields[3]) if fields[3].isdigit() else None
    return dict(sorted(sizes.items()))


def read_files(git: Git, commit: str, paths: Iterable[str]) -> dict[str, bytes | None]:
    """The contents of ``paths`` at ``commit`` through one ``git cat-file --batch``.

    A path whose blob the repository lacks (a partial snapshot) maps to None.
    """
    wanted = [p for p in dict.fromkeys(paths) if "\n" not in p]
    if not wanted:
        return {}
    request = "".join(f"{commit}:{p}\n" for p in wanted).encode()
    # Git.run decodes text; blobs are read as bytes, with the same argv and environment.
    proc = subprocess.run(
        git.argv(["cat-file", "--batch"]), input=request, capture_output=True, env=git_env()
    )
    if proc.returncode != 0:
        last = proc.stderr.decode(errors="replace").strip().splitlines()
        raise InputError(f"cannot read files of {commit[:12]}: {last[-1] if last else proc.returncode}")
    raw = proc.stdout
    out: dict[str, bytes | None] = {}
    pos = 0
    for path in wanted:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].decode(errors="replace").split()
        pos = end + 1
        if len(header) != 3 or header[1] != "blob":
            out[path] = None  # "<object> missing", or not a blob
            continue
        size = int(header[2])
        out[path] = raw[pos : pos + size]
        pos += size + 1
    return out


def work_tree_state(directory: Path) -> WorkTreeState:
    """HEAD and cleanliness of a work tree (read-only: ``rev-parse`` and ``status``)."""
    if not directory.is_dir():
        raise InputError(f"{directory} is not a directory")
    if not os.path.lexists(directory / ".git"):
        raise InputError(f"{directory} is not a git work tree")
    # Read through a private repository (git/private.py), the work tree given to it explicitly:
    # git never runs with the named repository's own configuration.
    try:
        view = read_in_place(directory.resolve(), str(directory))
    except InputError:
        raise InputError(f"{directory} is not a git work tree") from None
    git = Git(view.path, bare=True, label=str(directory))
    head = resolve_commit(git, "HEAD", str(directory))
    status = git.run(
        "--work-tree", str(directory.resolve()), "status", "--porcelain", "--untracked-files=normal"
    )
    lines = status.splitlines()
    return WorkTreeState(head=head, clean=not lines, changes=tuple(lines[:3]))


def work_tree_status(directory: Path, *options: str) -> str:
    """``git status --porcelain`` of the work tree ``directory``, git's repository being a private copy
    (git/private.py): a build that rewrote the checkout's ``.git/config`` makes git run nothing."""
    view = read_in_place(directory.resolve(), str(directory))
    git = Git(view.path, bare=True, label=str(directory))
    return git.run("--work-tree", str(directory.resolve()), "status", "--porcelain", *options)
