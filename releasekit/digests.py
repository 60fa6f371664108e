"""The sha256 of a file, read in 1 MiB chunks (a wheel or an image layer never sits whole in memory).

The one helper every stage uses for "the sha256 of this file" (wheels, layers, archive
entries, model files, Dockerfiles, locks): one definition, so every record names the same
digest for the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK_BYTES = 1 << 20


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file's bytes; OSError when it cannot be read."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


__all__ = ["CHUNK_BYTES", "file_sha256"]
