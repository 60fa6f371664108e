"""The sha256 of a file, read in 1 MiB chunks (a wheel or an image layer never sits whole in memory).

The one helper every stage uses for "the sha256 of this file" (wheels, layers, archive
entries, model files, Dockerfiles, locks): one definition, so every record names the same
digest for the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from releasekit.bounded_read import open_regular

CHUNK_BYTES = 1 << 20


def file_sha256(path: Path, *, max_bytes: int | None = None, within: Path | None = None) -> str:
    """Hex sha256 of the file's bytes; OSError when it cannot be read.

    Only a regular file is read (``bounded_read.open_regular``: a FIFO or device is refused
    before ``open()`` could block, a symbolic link only when it stays inside ``within``, when
    given); a file over ``max_bytes`` is refused on its ``stat`` before a byte is hashed. Both
    refusals are ``UnsafeFileError`` (exit 2)."""
    digest = hashlib.sha256()
    with open(open_regular(path, limit=max_bytes, within=within), "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


__all__ = ["CHUNK_BYTES", "file_sha256"]
