"""Say where a missing object is used: git's ``fatal: unable to read <sha>`` names only the object.

A mirror without some large blobs fails on them only when a diff needs their content. The
commit that adds, changes or deletes the blob, and its path, are found from tree entries
alone (``git log --raw --find-object``), over the revisions of the command that failed,
so the user learns which file of which commit the mirror lacks.
"""

from __future__ import annotations

import re

from releasekit.errors import InputError
from releasekit.git.runner import Git, GitFailed

_UNREADABLE = re.compile(r"unable to read ([0-9a-f]{40})")


def missing_object_note(git: Git, exc: GitFailed) -> str:
    """`` (object X is PATH in commit C "subject")`` for an unreadable-object failure, else ''."""
    found = _UNREADABLE.search(exc.reason)
    if not found or not exc.argv or exc.argv[0] not in ("log", "rev-list", "diff", "show"):
        return ""
    sha = found.group(1)
    revs = [a for a in exc.argv[1:] if a and not a.startswith("-") and " " not in a]
    if not revs:
        return ""
    try:
        out = git.run(
            "log",
            "--no-renames",
            "--raw",
            "--no-abbrev",
            "--format=C%x09%H%x09%s",
            f"--find-object={sha}",
            "--max-count=1",
            *revs,
            "--",
        )
    except GitFailed:
        return ""
    commit = subject = path = ""
    for line in out.splitlines():
        if line.startswith("C\t"):
            _, commit, subject = (line.split("\t", 2) + [""])[:3]
        elif line.startswith(":") and sha in line and "\t" in line:
            path = line.split("\t", 1)[1]
            break
    if not commit:
        return ""
    where = f"{path} in " if path else ""
    return f" (object {sha[:12]} is {where}commit {commit[:12]} {subject!r}; the mirror lacks it)"


def unresolvable_rev(git: Git, rev: str, where: str) -> InputError:
    """The one line for a revision that names no commit here: when it is a ref whose object the
    repository lacks (a partial mirror), the ref, the object and git's own message."""
    try:
        sha = git.run("rev-parse", "--verify", "--quiet", "--end-of-options", rev).strip()
    except GitFailed:
        return InputError(f"{where}: cannot resolve {rev!r} to a commit (no such branch, tag, ref or commit)")
    try:
        kind = git.run("cat-file", "-t", sha).strip()
    except GitFailed as exc:
        return InputError(
            f"{where}: {rev!r} points at {sha}, an object the repository lacks (git: {exc.reason})"
        )
    return InputError(f"{where}: {rev!r} points at {sha}, a {kind}, not a commit")
