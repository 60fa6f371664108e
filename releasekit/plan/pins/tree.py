"""One commit's files, read through git objects (``git ls-tree`` + ``git cat-file --batch``), never a work tree.

A repository is input: a pin input's blob may be of any size. Each blob's size comes from the
tree (``ls-tree -l``) before anything is read, and a blob over ``PIN_INPUT_MAX_BYTES`` is never
handed to ``cat-file``: the audit reports it as ``PIN_INPUT_UNREADABLE`` (its pins unchecked,
an error), so memory stays bounded whatever the repository holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from releasekit.errors import InputError
from releasekit.git.private import read_in_place
from releasekit.git.runner import Git
from releasekit.git.tree import commit_file_sizes, read_files

# Requirements files, Dockerfiles, workflows and pyproject.toml are kilobytes.
PIN_INPUT_MAX_BYTES = 16 << 20


@dataclass
class CommitTree:
    """The files of one commit: their paths, and a reader of their contents (git objects)."""

    files: list[str]
    reader: Callable[[Iterable[str]], dict[str, bytes | None]]
    _cache: dict[str, bytes | None] = field(default_factory=dict)
    # path -> blob size from the tree (None: the repository lacks the blob); absent: not known
    sizes: dict[str, int | None] = field(default_factory=dict)
    max_bytes: int = PIN_INPUT_MAX_BYTES

    def __post_init__(self) -> None:
        self.fileset = frozenset(self.files)

    def oversize(self, path: str) -> int | None:
        """The blob's size when it is over ``max_bytes`` (it is then never read), else None."""
        size = self.sizes.get(path)
        return size if size is not None and size > self.max_bytes else None

    def prefetch(self, paths: Iterable[str]) -> None:
        missing = [p for p in paths if p not in self._cache and self.oversize(p) is None]
        if missing:
            self._cache.update(self.reader(missing))

    def text(self, path: str) -> str | None:
        self.prefetch([path])
        data = self._cache.get(path)
        return None if data is None else data.decode("utf-8", errors="replace")


def commit_tree(git: Git, commit: str) -> CommitTree:
    """The files of ``commit`` in ``git``'s repository, read through git objects on demand."""
    sizes = commit_file_sizes(git, commit)
    return CommitTree(list(sizes), lambda paths: read_files(git, commit, paths), sizes=sizes)


def local_repository(directory: Path) -> Git:
    """A repository on disk named by the user (a work tree's top or a bare repository), read in place."""
    if not directory.is_dir():
        raise InputError(f"--repo {directory} is not a directory")
    # Read through a private repository (git/private.py): git never runs in the one named.
    try:
        view = read_in_place(directory.resolve(), f"--repo {directory}")
    except InputError:
        raise InputError(
            f"--repo {directory} is not a git repository (pins are read from a commit's tree through git objects)"
        ) from None
    return Git(view.path, bare=True, label=str(directory))
