"""The one interface the tar reader hashes large files through, and what a failure of it is.

A ``Hasher`` takes a large regular file's bytes while the reader goes on parsing the stream,
and delivers its digests to a sink (sha256, and the git blob id when asked). ``begin`` may
decline (False): the reader then hashes the file itself, in line. So there are two
strategies: in line, in the reader (every file below ``min_bytes``, and every file when
``min_bytes`` is 0), and ``HashThread`` (``hashthread.py``): one thread of this process for
the largest files, fed through a ring. ``ReadPlan.hasher()`` (``inventory.py``) makes it from
the plan's two knobs, ``hash_thread_bytes`` and ``hash_thread_ring_bytes``.

(Helper processes fed through a shared ring were a third strategy, the default from 4 cores;
measured in the same sessions they were never faster than the thread, so they went:
docs/benchmarks.md has the figures.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

Sink = Callable[[bytes, bytes], None]  # (sha256 digest, sha1 blob digest or b"")


class HashingError(Exception):
    """The hasher failed or the deadline passed: the read cannot be completed."""


def wait_slice(deadline: float | None) -> float:
    """How long one wait for a hasher may block: at most 1 s, never past ``deadline`` (then HashingError)."""
    if deadline is None:
        return 1.0
    left = deadline - time.monotonic()
    if left <= 0:
        raise HashingError("hashing ran past the time limit")
    return min(left, 1.0)


class Hasher(Protocol):
    min_bytes: int  # files below this size are declined (0: every file is)

    def prepare(self) -> None:
        """Get ready before a large file arrives (map the ring, start the thread); called once a stream is long."""

    def begin(self, size: int, blob: bool, sink: Sink) -> bool:
        """Take the next file of ``size`` bytes? False: the caller hashes it itself."""

    def write(self, data: Any) -> None:
        """The next bytes of the file ``begin`` took."""

    def end(self) -> None:
        """That file is complete: its digests go to its sink (possibly later, on another thread)."""

    def close(self) -> None:
        """Every digest delivered; a failure is raised here (``HashingError``)."""

    def abort(self) -> None:
        """Stop and release everything; safe after ``close`` and on any failure."""


__all__ = ["Hasher", "HashingError", "Sink", "wait_slice"]
