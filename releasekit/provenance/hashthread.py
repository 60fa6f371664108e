"""Hashing beside the tar reader on a thread of the same process, for large files only.

hashlib releases the GIL while it hashes a buffer of 2 KiB or more, so a thread can hash a
large file's bytes while the reader parses the headers that follow. The thread needs the GIL
back between two buffers, which it gets about once per chunk the reader receives; fed every
file of 64 KiB and more (what helper processes used to take) it waited more than it hashed, so it gets
only files of ``min_bytes`` and more (4 MiB by default: the few shared libraries that hold most
of an image's bytes), in spans of up to ``POST_BYTES``. That is what two cores can use: the
reader on one, the largest files on the other.

The bytes wait for the thread in a ring of ``ring_bytes`` (an anonymous mapping) that the
reader copies them into, not in the stream's own chunks: a chunk that stayed alive until the
thread got to it made the allocator take fresh memory for the next ones, and fresh memory
costs page faults on the reader's core (on the 2-core VM about 0.8 ms per MiB: holding 256 MiB
of chunks cost the reader ~0.18 s reading torch's tree, copying into a ring costs 0.06 s). The
ring's pages are faulted in by the thread while it has nothing to hash (reading ``/dev/zero``
into them, which lets go of the GIL), from ``prepare`` on: the reader calls it once a stream is
large enough to be worth it, so a small read never maps the ring. Memory is bounded by the
ring: past it the reader waits, with the read's deadline. Once every digest is delivered the
thread unmaps the ring and ends on its own; a read that fails waits for it.

It implements ``hasher.Hasher``: ``prepare``, ``begin`` (False: hash it yourself), ``write``,
``end``, ``close`` (every digest delivered; a failure on the thread is raised here) and
``abort``. Digests are delivered on the thread: the sink must set what a reader checks last.
"""

from __future__ import annotations

import hashlib
import mmap
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from releasekit.provenance.hasher import HashingError, wait_slice

POST_BYTES = 8 * 1024 * 1024  # a span handed to the thread: one GIL round trip per 8 MiB at most
FAULT_STEP = 2 * 1024 * 1024  # the thread faults the ring in this many bytes at a time
ZERO_SOURCE = "/dev/zero"  # what the thread reads into the ring to fault it in
THREAD_NAME = "releasekit-hash"

Sink = Callable[[bytes, bytes], None]


class HashThread:
    def __init__(
        self, min_bytes: int, ring_bytes: int, deadline: float | None, *, post_bytes: int = POST_BYTES
    ) -> None:
        self.min_bytes = min_bytes
        self._size = max(1, ring_bytes)
        self._post_bytes = max(1, post_bytes)
        self._deadline = deadline
        # (sha256, sha1 or None, span start, span end, sink on a file's last entry else None)
        self._queue: deque[tuple[Any, Any, int, int, Sink | None]] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._failed: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._ring: mmap.mmap | None = None
        self._view: memoryview | None = None
        # The reader's side: where the next byte goes, and where the current file's unposted bytes start.
        self._head = 0
        self._start = 0
        # Under the lock: bytes written and not yet hashed (they end at head), entries not yet done,
        # the prefix of the ring whose pages are in, and the span the thread is faulting in now.
        self._used = 0
        self._unfinished = 0
        self._ready = 0
        self._faulting: tuple[int, int] | None = None
        self._sha: Any = None
        self._blob: Any = None
        self._sink: Sink | None = None

    # --- the reader's side ---------------------------------------------------------------------

    def prepare(self) -> None:
        """Map the ring and start the thread, which faults the ring in until there is work."""
        if self.min_bytes and self._thread is None:
            self._ring = mmap.mmap(-1, self._size)
            self._view = memoryview(self._ring)
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._thread.start()

    def begin(self, size: int, blob: bool, sink: Sink) -> bool:
        if not self.min_bytes or size < self.min_bytes:
            return False
        self.prepare()
        self._sha = hashlib.sha256()
        self._blob = hashlib.sha1(b"blob %d\0" % size) if blob else None
        self._sink = sink
        self._start = self._head
        return True

    def write(self, data: Any) -> None:
        view = self._view
        assert view is not None
        n, done = len(data), 0
        while done < n:
            at, room = self._room()
            step = min(room, n - done)
            if at + step > self._ready:  # a stale _ready only errs towards taking the lock
                self._claim(at + step)
            view[at : at + step] = data[done : done + step]
            done += step
            self._head = at + step
            with self._cond:
                self._used += step
                if self._head - self._start >= self._post_bytes or self._head == self._size:
                    self._post()

    def end(self) -> None:
        with self._cond:
            self._post()
            self._queue.append((self._sha, self._blob, 0, 0, self._sink))
            self._unfinished += 1
            self._cond.notify()
        self._sha = self._blob = self._sink = None

    def _post(self) -> None:
        """The current file's bytes since the last post, as one span (called with the lock held)."""
        if self._head > self._start:
            self._queue.append((self._sha, self._blob, self._start, self._head, None))
            self._unfinished += 1
            self._cond.notify()
        self._start = self._head

    def _room(self) -> tuple[int, int]:
        """Where the next bytes go and how many fit there without wrapping; waits while the ring is full."""
        with self._cond:
            while True:
                self._check()
                size, used, head = self._size, self._used, self._head
                if not used:  # nothing waits: start over at the ring's (faulted-in) beginning
                    self._head = self._start = 0
                    return 0, size
                tail = (head - used) % size
                if head == size:  # a span never wraps: post what is there and go on at 0
                    self._post()
                    self._head = self._start = head = 0
                if head > tail:
                    return head, size - head
                if tail > head:
                    return head, tail - head
                self._post()  # full: let the thread have everything, then wait for room
                self._cond.wait(wait_slice(self._deadline))

    def _claim(self, end: int) -> None:
        """Take the ring up to ``end`` from the thread's faulting (the reader faults it in itself)."""
        with self._cond:
            while self._faulting is not None and self._faulting[0] < end:
                self._check()
                self._cond.wait(wait_slice(self._deadline))
            self._ready = max(self._ready, end)

    def _check(self) -> None:
        if self._failed is not None:
            raise HashingError(f"the hashing thread failed: {self._failed}")

    # --- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # noqa: BLE001 - reported to the reader
            with self._cond:
                self._failed = exc
                self._faulting = None
                self._cond.notify_all()
        finally:
            # The ring goes with the thread: unmapping 256 MiB takes ~70 ms (without the GIL), which a
            # finished read need not wait for.
            if self._view is not None:
                self._view.release()
            if self._ring is not None:
                self._ring.close()

    def _serve(self) -> None:
        try:
            zero = open(ZERO_SOURCE, "rb", buffering=0)  # noqa: SIM115 - closed below
        except OSError:  # faulting in is a head start only: without it the reader faults its pages itself
            with self._cond:
                self._ready = self._size
            zero = None
        try:
            self._loop(zero)
        finally:
            if zero is not None:
                zero.close()

    def _loop(self, zero: Any) -> None:
        queue, cond, view = self._queue, self._cond, self._view
        assert view is not None
        while True:
            with cond:
                while not queue and not self._stop and self._ready >= self._size:
                    cond.wait()
                if self._stop:
                    return
                if not queue:  # idle: fault in the next part of the ring
                    span = self._faulting = (self._ready, min(self._size, self._ready + FAULT_STEP))
                    item = None
                else:
                    item = queue.popleft()
            if item is None:
                done = span[1]
                try:
                    with view[span[0] : span[1]] as part:
                        zero.readinto(part)
                except OSError:
                    done = self._size  # stop faulting in; the reader faults what it writes
                with cond:
                    self._faulting = None
                    self._ready = max(self._ready, done)
                    cond.notify_all()
                continue
            sha, blob, a, b, sink = item
            if sink is not None:
                sink(sha.digest(), blob.digest() if blob is not None else b"")
            else:
                with view[a:b] as piece:
                    sha.update(piece)
                    if blob is not None:
                        blob.update(piece)
            with cond:
                self._used -= b - a
                self._unfinished -= 1
                cond.notify_all()

    # --- the end -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for every digest, then let the thread go (it unmaps the ring on its way out)."""
        if self._thread is None:
            return
        with self._cond:
            while self._unfinished and self._failed is None:
                self._cond.wait(wait_slice(self._deadline))
            self._check()
            self._stop = True
            self._cond.notify_all()
        self._thread = None

    def abort(self) -> None:
        """Stop the thread now and wait for it (after a failure; nothing to do once closed)."""
        if self._thread is None:
            return
        with self._cond:
            self._stop = True
            self._queue.clear()
            self._cond.notify_all()
        self._thread.join()
        self._thread = None
