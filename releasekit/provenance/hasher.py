"""The one interface the tar reader hashes large files through, and the choice of strategy.

A ``Hasher`` takes a large regular file's bytes while the reader goes on parsing the stream,
and delivers its digests to a sink (sha256, and the git blob id when asked). ``begin`` may
decline (False): the reader then hashes the file itself, in line. Two strategies implement it:

- ``HashPool`` (``hashpool.py``): helper processes fed through a shared ring; chosen on a host
  with 4 or more cores, or when ``ReadPlan.hash_processes`` asks for it;
- ``HashThread`` (``hashthread.py``): one thread of this process, for the largest files only;
  chosen otherwise (on one core its ``min_bytes`` is 0: it declines every file).

``ReadPlan.hasher()`` (``inventory.py``) is the only place that chooses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Sink = Callable[[bytes, bytes], None]  # (sha256 digest, sha1 blob digest or b"")


class Hasher(Protocol):
    def prepare(self) -> None:
        """Get ready before a large file arrives (map rings, start helpers); called once a stream is long."""

    def begin(self, size: int, blob: bool, sink: Sink) -> bool:
        """Take the next file of ``size`` bytes? False: the caller hashes it itself."""

    def write(self, data: Any) -> None:
        """The next bytes of the file ``begin`` took."""

    def end(self) -> None:
        """That file is complete: its digests go to its sink (possibly later, on another thread)."""

    def close(self) -> None:
        """Every digest delivered; a failure of the strategy is raised here (``HashPoolError``)."""

    def abort(self) -> None:
        """Stop and release everything; safe after ``close`` and on any failure."""


__all__ = ["Hasher", "Sink"]
