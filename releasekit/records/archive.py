"""``archive.json``: the release source archive, the files a release can be rebuilt from alone.

Written by the build stage beside ``archive/``: one git bundle per git component (the locked
commit and exactly the objects it needs), the locked wheel of each wheel component, the
manifest and the lock. Every file is listed with its sha256 and size; the provenance lists the
same files (and this index) as byproducts. ``publish`` attaches them to the image digest and
``reproduce`` verifies every hash before it rebuilds from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from releasekit.bounded_read import MIB
from releasekit.digests import file_sha256 as file_sha256  # publish and reproduce check entries with it
from releasekit.records.base import Record, RecordError, Strict, load_record, write_record

ARCHIVE_SCHEMA: Final = "releasekit.archive/v1"
ARCHIVE_FILE: Final = "archive.json"
ARCHIVE_DIR: Final = "archive"

EntryKind = Literal["git-bundle", "wheel", "manifest", "lock"]


class ArchiveEntry(Strict):
    path: str  # relative to the release directory, always under archive/
    kind: EntryKind
    sha256: str
    size: int
    component: str | None = None
    repo: str | None = None  # git-bundle: the locked repository (names the mirror; never fetched from)
    ref: str | None = None  # git-bundle: the ref in the bundle that names the commit
    commit: str | None = None
    tree: str | None = None


class ArchiveIndex(Record):
    kind = "release archive index"
    max_bytes = 16 * MIB  # checked on stat before reading (bounded_read.py)

    schema_: Literal["releasekit.archive/v1"] = Field(default=ARCHIVE_SCHEMA, alias="schema")
    name: str
    lock_sha256: str
    manifest_sha256: str
    entries: list[ArchiveEntry]

    @property
    def total_size(self) -> int:
        return sum(e.size for e in self.entries)

    def entry(self, kind: EntryKind) -> ArchiveEntry:
        found = [e for e in self.entries if e.kind == kind]
        if len(found) != 1:
            raise RecordError(f"{ARCHIVE_FILE}: expected one {kind} entry, found {len(found)}")
        return found[0]

    def bundles(self) -> list[ArchiveEntry]:
        return [e for e in self.entries if e.kind == "git-bundle"]

    def wheels(self) -> list[ArchiveEntry]:
        return [e for e in self.entries if e.kind == "wheel"]


def safe_entry_path(path: str) -> bool:
    """An entry path is relative, under archive/, and has no '..' or empty parts."""
    parts = path.split("/")
    return (
        parts[0] == ARCHIVE_DIR
        and len(parts) > 1
        and all(p not in ("", ".", "..") for p in parts)
        and "\\" not in path
    )


def read_archive(path: Path) -> ArchiveIndex:
    return load_record(ArchiveIndex, path)


def write_archive(index: ArchiveIndex, path: Path) -> str:
    return write_record(index, path)
