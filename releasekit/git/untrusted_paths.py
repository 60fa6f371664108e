"""Checks on a repository someone else prepared, made before any git process opens it.

git opens a repository's small control files with a plain blocking ``open()``: a FIFO planted
as ``objects/info/alternates`` (or ``config``, ``HEAD``, ``packed-refs``) hangs ``plan lock``
and ``verify-provenance`` past any ``--deadline``, and a link to ``/dev/zero`` there makes git
read forever. :func:`check_git_dir` looks at each of them (``lstat``, no open) and refuses
anything that is not a regular file of bounded size, following ``alternates`` to the object
directories it names (as git does, to a bounded depth). One line, exit 2 (``UnsafeFileError``).

Called on a ``--mirror`` / ``RELEASEKIT_MIRRORS`` repository before it is borrowed from; the
rewrite of how mirrors are opened (a private repository borrowing through checked alternates)
can call it on every object directory it lists.
"""

from __future__ import annotations

import os
from pathlib import Path

from releasekit.bounded_read import MIB, check_regular, read_bounded

# Control files git reads whole; a real one is far below these (packed-refs of a big fork: tens of MiB).
CONTROL_FILES = {"HEAD": 4096, "config": MIB, "commondir": 4096, "packed-refs": 256 * MIB}
ALTERNATES_MAX_BYTES = 64 * 1024
# git itself stops following alternates 5 levels down.
ALTERNATES_DEPTH = 5


def check_git_dir(gitdir: Path) -> None:
    """``gitdir``'s control files and its ``objects`` chain are regular, bounded, not devices or FIFOs."""
    for name, limit in CONTROL_FILES.items():
        path = gitdir / name
        if os.path.lexists(path):
            check_regular(path, limit=limit)
    check_object_dir(gitdir / "objects")


def check_object_dir(objects: Path, depth: int = 0) -> None:
    """``objects/info/alternates`` (and ``http-alternates``) regular and bounded, and each object
    directory they name checked the same way, ``ALTERNATES_DEPTH`` levels down."""
    if depth > ALTERNATES_DEPTH:
        return
    http = objects / "info" / "http-alternates"
    if os.path.lexists(http):
        check_regular(http, limit=ALTERNATES_MAX_BYTES)
    alternates = objects / "info" / "alternates"
    if not os.path.lexists(alternates):
        return
    text = read_bounded(alternates, ALTERNATES_MAX_BYTES).decode("utf-8", errors="replace")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        listed = Path(line) if os.path.isabs(line) else objects / line
        if os.path.isdir(listed):
            check_object_dir(listed, depth + 1)


__all__ = ["ALTERNATES_MAX_BYTES", "CONTROL_FILES", "check_git_dir", "check_object_dir"]
