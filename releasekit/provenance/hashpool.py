"""Hashing beside the tar reader: helper processes that hash file data while the reader parses headers.

The tar reader is Python and holds the GIL; a helper thread that hashes every file of 64 KiB
and more has to win the GIL back after every buffer, and on two cores that cost more than it
saved (``hashthread.py`` keeps a thread for the largest files only). Helper processes do not
share a GIL. Each one owns a ring of shared memory (a memfd): the reader copies a file's
bytes into the ring and sends one small request per piece through a pipe; the helper hashes
the piece in place and answers every request, in order, so the reader knows which bytes of the
ring are free again. A file goes to one helper (its pieces in order); the reader picks the
helper with the fewest bytes outstanding. Requests in flight per helper are capped so that
neither pipe can fill: the reader never blocks on a write, only while it waits for room.

Memory is bounded: ``processes`` rings of ``ring_bytes`` each. Nothing here trusts the image:
the helpers hash what the reader copied, the reader keeps its own count of every request, and
a helper that dies, answers out of turn or outlives the deadline stops the read.
"""

from __future__ import annotations

import mmap
import os
import select
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from releasekit.provenance.hashworker import BLOB, FIRST, LAST, REQUEST, RESPONSE

WORKER = str(Path(__file__).with_name("hashworker.py"))
PIECE_MAX = 8 * 1024 * 1024  # one request covers at most this much of the ring
REQUESTS_IN_FLIGHT = 256  # per helper: 256 requests (9 KiB) and answers (14 KiB) fit any pipe buffer
_ZERO_SHA1 = bytes(20)


class HashPoolError(Exception):
    """A helper failed or the deadline passed: the read cannot be completed."""


def wait_slice(deadline: float | None) -> float:
    """How long one wait for a hasher may block: at most 1 s, never past ``deadline`` (then HashPoolError)."""
    if deadline is None:
        return 1.0
    left = deadline - time.monotonic()
    if left <= 0:
        raise HashPoolError("hashing ran past the time limit")
    return min(left, 1.0)


class _Helper:
    __slots__ = (
        "proc",
        "ring",
        "size",
        "requests",
        "responses",
        "alloc",
        "freed",
        "sent",
        "answers",
        "piece_at",
        "piece_len",
        "number",
        "flags",
        "sink",
    )

    def __init__(self, ring_bytes: int) -> None:
        fd = os.memfd_create("releasekit-hash", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, ring_bytes)
            self.ring = mmap.mmap(fd, ring_bytes)
            self.proc = subprocess.Popen(  # noqa: S603 - this interpreter, our own helper script
                [sys.executable, "-I", "-S", WORKER, str(fd), str(ring_bytes)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                pass_fds=(fd,),
                close_fds=True,
            )
        finally:
            os.close(fd)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.size = ring_bytes
        self.requests = self.proc.stdin.fileno()
        self.responses = self.proc.stdout.fileno()
        os.set_blocking(self.responses, False)
        self.alloc = 0  # ring position (ever-growing; modulo size in the ring) of the next byte
        self.freed = 0  # every byte before this position has been hashed
        # per request sent and not yet answered: (its end in the ring, its file, where the digests go or None)
        self.sent: deque[tuple[int, int, Callable[[bytes, bytes], None] | None]] = deque()
        self.answers = b""
        self.piece_at = 0
        self.piece_len = 0
        self.number = 0
        self.flags = 0
        self.sink: Callable[[bytes, bytes], None] | None = None

    @property
    def outstanding(self) -> int:
        return self.alloc - self.freed


class HashPool:
    """``processes`` helpers, started at the first file handed over; ``None`` from ``begin`` means hash here."""

    def __init__(self, processes: int, ring_bytes: int, deadline: float | None) -> None:
        self._processes = processes
        self._ring_bytes = ring_bytes
        self._deadline = deadline
        self._helpers: list[_Helper] = []
        self._numbers = 0
        self._current: _Helper | None = None
        self._file_size = 0
        self.usable = processes > 0 and hasattr(os, "memfd_create")

    # --- the reader's side: one file at a time -----------------------------------------------

    def prepare(self) -> None:
        """A large stream: nothing to get ready (the helpers start at the first file handed over)."""

    def begin(self, size: int, blob: bool, sink: Callable[[bytes, bytes], None]) -> bool:
        """Start a file of ``size`` bytes; ``sink(sha256, blob_sha1)`` gets its digests later."""
        if not self.usable:
            return False
        if len(self._helpers) < self._processes:
            try:
                self._helpers.append(_Helper(self._ring_bytes))
            except OSError:
                if not self._helpers:
                    self.usable = False
                    return False
                self._processes = len(self._helpers)
        helper = min(self._helpers, key=lambda h: h.outstanding)
        self._numbers += 1
        helper.number = self._numbers
        helper.flags = FIRST | (BLOB if blob else 0)
        helper.sink = sink
        helper.piece_at, helper.piece_len = helper.alloc, 0
        self._current = helper
        self._file_size = size
        return True

    def write(self, data: Any) -> None:
        """The next bytes of the current file (a memoryview slice of the stream)."""
        h = self._current
        assert h is not None
        size = h.size
        while len(data):
            at = h.alloc % size
            free = size - (h.alloc - h.freed)
            room = min(size - at, free, PIECE_MAX - h.piece_len)
            if room <= 0:
                if h.piece_len:
                    self._send(h, last=False)
                else:
                    self._wait(h)
                continue
            n = len(data) if len(data) < room else room
            h.ring[at : at + n] = data[:n]
            h.alloc += n
            h.piece_len += n
            data = data[n:]
            if at + n == size or h.piece_len == PIECE_MAX:
                self._send(h, last=False)  # a piece never wraps around the ring's end

    def end(self) -> None:
        h = self._current
        assert h is not None
        self._send(h, last=True)
        self._current = None
        self._collect(h)

    def _send(self, h: _Helper, *, last: bool) -> None:
        while len(h.sent) >= REQUESTS_IN_FLIGHT:
            self._wait(h)
        flags = h.flags | (LAST if last else 0)
        record = REQUEST.pack(h.number, flags, h.piece_at % h.size, h.piece_len, self._file_size)
        h.sent.append((h.alloc, h.number, h.sink if last else None))
        try:
            os.write(h.requests, record)  # never blocks: the requests in flight fit the pipe
        except OSError as exc:  # the helper is gone (EPIPE): whichever of the pipes notices first
            code = h.proc.poll()
            how = f"exit {code}" if code is not None else type(exc).__name__
            raise HashPoolError(
                f"a hashing helper process stopped ({how}) with {len(h.sent)} requests unanswered"
            ) from None
        h.flags &= ~FIRST
        h.piece_at, h.piece_len = h.alloc, 0

    # --- answers -----------------------------------------------------------------------------

    def _wait(self, h: _Helper) -> None:
        """Block until ``h`` answers at least one request (or fail: dead helper, deadline)."""
        before = len(h.sent)
        while len(h.sent) == before:
            select.select([h.responses], [], [], wait_slice(self._deadline))
            self._collect(h)

    def _collect(self, h: _Helper) -> None:
        """Every answer ``h`` has written so far (without blocking)."""
        size = RESPONSE.size
        while True:
            try:
                data = os.read(h.responses, size * 1024)
            except BlockingIOError:
                return
            if not data:
                if h.sent:
                    code = h.proc.poll()
                    how = f"exit {code}" if code is not None else "closed its pipe"
                    raise HashPoolError(
                        f"a hashing helper process stopped ({how}) with {len(h.sent)} requests unanswered"
                    )
                return
            h.answers += data
            count = len(h.answers) // size
            if count > len(h.sent):
                raise HashPoolError("a hashing helper process answered more requests than it was sent")
            for number, sha256, sha1 in RESPONSE.iter_unpack(h.answers[: count * size]):
                end, expected, sink = h.sent.popleft()
                if number != expected:
                    raise HashPoolError(f"a hashing helper process answered for file {number} out of turn")
                h.freed = end
                if sink is not None:
                    sink(sha256, sha1 if sha1 != _ZERO_SHA1 else b"")
            h.answers = h.answers[count * size :]

    def close(self) -> None:
        """Wait for every digest; then stop the helpers."""
        for h in self._helpers:
            assert h.proc.stdin is not None
            h.proc.stdin.close()  # the helper finishes what it has, answers, and exits
        for h in self._helpers:
            while h.sent:
                self._wait(h)
            if h.proc.wait(timeout=10) != 0:
                raise HashPoolError(f"a hashing helper process exited with {h.proc.returncode}")
        self.abort()

    def abort(self) -> None:
        """Stop every helper now (after a failure, or once closed)."""
        for h in self._helpers:
            if h.proc.poll() is None:
                h.proc.kill()
                h.proc.wait()
            for stream in (h.proc.stdin, h.proc.stdout):
                if stream is not None and not stream.closed:
                    stream.close()
            h.ring.close()
        self._helpers = []
        self.usable = False
