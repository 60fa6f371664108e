"""One commit's tree scanned by every content rule, through git objects.

Sizes come first (``git ls-tree -l``): only files whose kind the path names, or extensionless
files (a ``#!`` script), at most ``MAX_FILE_BYTES`` each, are read, in one ``cat-file --batch``.
A blob with a NUL byte in its head is binary and is not read as text.
"""

from __future__ import annotations

from dataclasses import dataclass

from releasekit.git.runner import Git
from releasekit.git.tree import commit_file_sizes, read_files
from releasekit.plan.content.interface import Hit, ScannedFile
from releasekit.plan.content.reading import kind_by_path, kind_of, maybe_script
from releasekit.plan.content.registry import RECOGNISERS
from releasekit.plan.content.switches import Switch, in_scope, switches_in

MAX_FILE_BYTES = 512 * 1024
# An extensionless file is read only when small enough to be a script, not a data blob.
MAX_SCRIPT_BYTES = 128 * 1024
# Vendored environments and caches are not the project's files.
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", ".tox"}


@dataclass(frozen=True)
class ContentScan:
    """What the content rules found in one commit: hits in path/line order, and what was not read."""

    commit: str
    hits: tuple[Hit, ...]
    read: int  # text files the rules read
    unread: tuple[tuple[str, str], ...]  # (path, why): too large, or a blob the snapshot lacks
    switches: tuple[Switch, ...] = ()  # runtime switches the release's recipes set (switches.py)


def _candidates(sizes: dict[str, int | None]) -> tuple[list[str], list[tuple[str, str]]]:
    wanted: list[str] = []
    unread: list[tuple[str, str]] = []
    for path, size in sizes.items():
        if any(d in _SKIP_DIRS for d in path.split("/")[:-1]):
            continue
        named = kind_by_path(path) is not None
        if not named and not maybe_script(path):
            continue
        limit = MAX_FILE_BYTES if named else MAX_SCRIPT_BYTES
        if size is None:
            if named:
                unread.append((path, "its blob is not in this repository (a partial snapshot)"))
        elif size > limit:
            if named:
                unread.append((path, f"{size} bytes, over the {limit}-byte limit"))
        else:
            wanted.append(path)
    return wanted, unread


def scan_commit(
    git: Git, commit: str, *, packages: tuple[str, ...] = (), recipes: tuple[str, ...] | None = None
) -> ContentScan:
    """Every content rule over the text files of ``commit``, and the runtime switches its recipes set;
    ``packages``: the component's import names; ``recipes``: its ``runtime_recipes`` patterns."""
    wanted, unread = _candidates(commit_file_sizes(git, commit))
    blobs = read_files(git, commit, wanted)
    hits: list[Hit] = []
    switches: list[Switch] = []
    read = 0
    for path in wanted:
        data = blobs.get(path)
        if data is None:
            if kind_by_path(path) is not None:
                unread.append((path, "its blob could not be read"))
            continue
        kind = kind_of(path, data[:256])
        if kind is None or b"\0" in data[:8192]:
            continue
        read += 1
        source = ScannedFile(path, kind, data.decode("utf-8", errors="replace"), packages)
        for recogniser in RECOGNISERS:
            if kind in recogniser.kinds:
                hits.extend(recogniser.find(source))
        if in_scope(path, recipes):
            switches.extend(switches_in(source))
    hits.sort(key=lambda h: (h.file, h.line, h.rule))
    switches.sort(key=lambda s: (s.file, s.line, s.name))
    return ContentScan(commit, tuple(dict.fromkeys(hits)), read, tuple(sorted(unread)), tuple(switches))
