"""File-level accounting: every entry of the exported image against what the base and the locked wheels make.

The reference is never the candidate: it is the locked base image's own export (type,
mode, owner, link target and sha256 of every entry) overlaid with the reproduced release
layer, which is what installing the locked wheels into that base writes, installer files
(RECORD, INSTALLER, direct_url.json, console-script wrappers) included, recomputed here.
The base's table is kept in the build cache, keyed by the base image ID (content-addressed).
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from releasekit import atomic
from releasekit.provenance.inventory import CHUNK, FileEntry, Inventory, ReadPlan, inventory_from_tar

ACCOUNTING_FORMAT = "releasekit.file-accounting/v1"


class Expected(NamedTuple):
    """One entry as the accounting compares it (a tuple: equal entries compare in C)."""

    kind: str
    mode: int
    uid: int
    gid: int
    link: str | None
    sha256: str | None
    size: int


def _expected(entry: FileEntry) -> Expected:
    return Expected(
        entry.kind,
        entry.mode,
        entry.uid,
        entry.gid,
        entry.link,
        entry.sha256.hex() if entry.sha256 is not None else None,
        entry.size if entry.kind == "file" else 0,
    )


def table(inv: Inventory) -> dict[str, Expected]:
    return {path: _expected(entry) for path, entry in inv.files.items()}


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def layer_table(layer: Path, deadline: float | None) -> dict[str, Expected]:
    """A layer tar's entries (no whiteouts: the release layer is a plain pip install)."""
    plan = ReadPlan(python_roots=[], hash_all=True, extra_digests=False, deadline=deadline, max_kept_bytes=0)
    return table(inventory_from_tar(_file_chunks(layer), plan))


def overlay(base: dict[str, Expected], layer: dict[str, Expected]) -> dict[str, Expected]:
    """The layer on top of the base: an entry replaces the base's; a whiteout removes a path."""
    merged = dict(base)
    for path, entry in layer.items():
        name = path.rsplit("/", 1)[-1]
        if name.startswith(".wh."):
            directory = path.rsplit("/", 1)[0]
            if name == ".wh..wh..opq":
                prefix = directory.rstrip("/") + "/"
                for p in [p for p in merged if p.startswith(prefix)]:
                    del merged[p]
            else:
                gone = f"{directory}/{name[4:]}"
                prefix = gone + "/"
                for p in [p for p in merged if p == gone or p.startswith(prefix)]:
                    del merged[p]
            continue
        merged[path] = entry
    return merged


def save_table(entries: dict[str, Expected], path: Path) -> None:
    """Whole or not at all (``releasekit.atomic``): a killed verifier never leaves a table that lacks lines."""
    lines = [json.dumps({"format": ACCOUNTING_FORMAT}) + "\n"]
    for p, e in sorted(entries.items()):
        lines.append(json.dumps([p, e.kind, e.mode, e.uid, e.gid, e.link, e.sha256, e.size]) + "\n")
    atomic.write_bytes(path, "".join(lines).encode("utf-8"))


def load_table(path: Path) -> dict[str, Expected] | None:
    try:
        with path.open(encoding="utf-8") as handle:
            if json.loads(handle.readline()).get("format") != ACCOUNTING_FORMAT:
                return None
            out: dict[str, Expected] = {}
            for line in handle:
                p, kind, mode, uid, gid, link, sha, size = json.loads(line)
                out[p] = Expected(kind, mode, uid, gid, link, sha, size)
            return out
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def differences(want: Expected, have: FileEntry) -> list[str]:
    got = _expected(have)
    if got == want:
        return []
    out: list[str] = []
    if got.kind != want.kind:
        return [f"type {got.kind}, expected {want.kind}" + (f" -> {got.link}" if got.link else "")]
    if got.link != want.link:
        out.append(f"link target {got.link!r}, expected {want.link!r}")
    if got.sha256 != want.sha256:
        if got.sha256 is None:
            out.append("contents not hashed")
        else:
            out.append(
                f"sha256 {got.sha256[:12]} ({got.size} bytes), expected {str(want.sha256)[:12]} ({want.size} bytes)"
            )
    if got.mode != want.mode:
        out.append(f"mode {got.mode:o}, expected {want.mode:o}")
    if (got.uid, got.gid) != (want.uid, want.gid):
        out.append(f"owner {got.uid}:{got.gid}, expected {want.uid}:{want.gid}")
    return out


def is_tar(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False
