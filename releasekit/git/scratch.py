"""Object writes that must not land in the repository being read.

``git merge-tree --write-tree`` (how ``audit release-only`` tells an automatic merge from a
hand-made resolution) writes the merged trees and blobs into the object store. A
repository releasekit was given to read (``--repo DIR``, a team's shared mirror, a
read-only one) must come out byte-identical, so those writes go to a throw-away object
directory of releasekit's own that borrows the repository's objects as an alternate
(``GIT_OBJECT_DIRECTORY`` + ``GIT_ALTERNATE_OBJECT_DIRECTORIES``).

Commands that do write objects of their own (``plan compose`` merging in a fresh checkout
whose objects are borrowed from the cache and, through it, from a ``--mirror``) run inside
``object_times_kept``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from releasekit.errors import InputError
from releasekit.git.private import checked_object_dirs
from releasekit.git.runner import Git, git_env, run_git

# ``git merge-tree --write-tree`` (a merge computed without a work tree) came with git 2.38.
MERGE_TREE_WRITE_TREE = (2, 38)

_OBJECTS: dict[tuple[Path, bool], str] = {}


def objects_dir(git: Git) -> str:
    """The absolute object directory of ``git``'s repository (bare or with a work tree)."""
    key = (git.directory, git.bare)
    if key not in _OBJECTS:
        if git.bare and (git.directory / "objects").is_dir():
            found = str((git.directory / "objects").resolve())
        elif not git.bare and (git.directory / ".git" / "objects").is_dir():
            found = str((git.directory / ".git" / "objects").resolve())  # no process: the common case
        else:
            common = git.run("rev-parse", "--path-format=absolute", "--git-common-dir").strip()
            found = str(Path(common) / "objects")
        _OBJECTS[key] = found
    return _OBJECTS[key]


def _object_dirs(objects: Path) -> list[Path]:
    """``objects`` and, recursively, the object directories it borrows from (``info/alternates``)."""
    try:
        return checked_object_dirs(objects, str(objects))
    except InputError:
        return [objects] if objects.is_dir() else []


def _object_times(objects: Path) -> dict[str, tuple[int, int]]:
    """path -> (atime, mtime) of every pack and loose object file (what git "freshens"), alternates included."""
    times: dict[str, tuple[int, int]] = {}
    for directory in _object_dirs(objects):
        for sub in directory.iterdir():
            if sub.name == "info" or not sub.is_dir():
                continue
            for entry in os.scandir(sub):
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    times[entry.path] = (st.st_atime_ns, st.st_mtime_ns)
    return times


@contextmanager
def object_times_kept(git: Git) -> Iterator[None]:
    """Put back the times of the object files git "freshens" while the block runs.

    git sets the mtime of an object file (a pack or a loose object) to now when it would
    write an object it finds already there, through alternates too, so that gc keeps it.
    Where the filesystem lets it (root, a writable copy), those times are put back
    afterwards: a repository releasekit only reads (a ``--mirror`` borrowed by the cache,
    a ``--repo DIR``) comes out as it was, times included. On a truly read-only one the
    freshening fails and git writes those objects into the directory it writes to instead.
    """
    times = _object_times(Path(objects_dir(git)))
    try:
        yield
    finally:
        for path, (atime, mtime) in times.items():
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    os.utime(path, ns=(atime, mtime))
            except OSError:
                continue


@contextmanager
def scratch_objects(git: Git) -> Iterator[dict[str, str]]:
    """The environment of git processes whose object writes go to a throw-away directory.

    Objects are read from ``git``'s repository (as an alternate) and written to a temporary
    object directory removed afterwards; the times of the repository's object files are
    put back (``object_times_kept``).
    """
    with object_times_kept(git), tempfile.TemporaryDirectory(prefix="releasekit-objects-") as scratch:
        env = git_env()
        env.update(GIT_OBJECT_DIRECTORY=scratch, GIT_ALTERNATE_OBJECT_DIRECTORIES=objects_dir(git))
        yield env


def merge_tree(git: Git, first: str, second: str) -> str | None:
    """The tree git's own merge of two commits gives (None when it conflicts), written outside the repository."""
    with scratch_objects(git) as env:
        proc = subprocess.run(
            git.argv(["merge-tree", "--write-tree", "--no-messages", first, second]),
            capture_output=True,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    if proc.returncode != 0:
        return None
    return proc.stdout.decode().split()[0]


def git_version() -> tuple[int, ...]:
    """The version of the git on ``PATH`` as numbers (``git version 2.39.5`` -> (2, 39, 5)); () when unreadable."""
    return _version_of(shutil.which("git") or "git")


@functools.cache
def _version_of(binary: str) -> tuple[int, ...]:
    """Asked once per git binary (``binary`` keys the cache: ``run_git`` runs the one on ``PATH``)."""
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", run_git(["version"]))
    return tuple(int(part) for part in found.groups() if part is not None) if found else ()


@dataclass(frozen=True)
class MergeCheck:
    """What git's own merge of two commits says: the files that conflict (none: it merges cleanly),
    or, in ``unknown``, why git could not tell (git too old, an object the repository lacks)."""

    conflicts: tuple[str, ...] = ()
    unknown: str | None = None


def merge_conflicts(git: Git, first: str, second: str) -> MergeCheck:
    """The files that conflict when ``second`` is merged into ``first`` (``git merge-tree --write-tree``,
    git 2.38 or later), its objects written outside the repository."""
    version = git_version()
    if version < MERGE_TREE_WRITE_TREE:
        have = ".".join(str(v) for v in version) or "of unknown version"
        return MergeCheck(unknown=f"git {have} is too old: merge-tree --write-tree needs git 2.38 or later")
    with scratch_objects(git) as env:
        proc = subprocess.run(
            git.argv(["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", first, second]),
            capture_output=True,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    if proc.returncode == 0:
        return MergeCheck()
    if proc.returncode == 1:
        # -z --name-only: the tree's OID, then each conflicted file's name, NUL-terminated.
        names = [n.decode(errors="replace") for n in proc.stdout.split(b"\0")[1:] if n]
        return MergeCheck(conflicts=tuple(dict.fromkeys(names)))
    lines = proc.stderr.decode(errors="replace").strip().splitlines()
    why = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[0] if lines else "")
    return MergeCheck(unknown=f"git merge-tree failed (exit {proc.returncode}): {why or 'no message'}")
