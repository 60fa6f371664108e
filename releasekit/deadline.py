"""One bound over a whole command (``verify-provenance --deadline``), whatever it is waiting on.

The verifier's own readers check the deadline as they go (the export stream, the hashers, the probe's
timeout), and turn it into a finding. What they do not see, a Docker Engine that accepts a
connection and never answers, a git or build process that stalls, a file that blocks, would let the
command run for as long as its slowest part allows. So the command also arms a timer (``SIGALRM``)
a grace period after its deadline; when it fires, :class:`DeadlinePassed` is raised in the main
thread, wherever it is blocked (Python retries an interrupted system call only after running the
handler, PEP 475). ``subprocess.run`` kills its child on the way out, and the ``with`` blocks that
own containers and temporary directories clean up as usual. It is a ``BaseException``, like
``KeyboardInterrupt``, so no ``except Exception`` on the way swallows it; the CLI prints one line and
exits 1. Nothing is written after it: the records are written atomically at the end, or not at all.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class DeadlinePassed(BaseException):
    """The command's ``--deadline`` (and its grace) passed: it stops where it is."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_command_start: list[float] = []


def start_command() -> None:
    """The command starts now (the CLI calls this first): what is bounded over a whole command, such as
    the total of its git processes (``RELEASEKIT_GIT_TOTAL_TIMEOUT``), counts from here."""
    _command_start[:] = [time.monotonic()]


def since_command_start() -> float:
    """Seconds since ``start_command`` (a library caller's command starts at its first question)."""
    if not _command_start:
        start_command()
    return time.monotonic() - _command_start[0]


def grace_for(seconds: float) -> float:
    """How long after the deadline the hard stop comes: time for the readers that check the deadline
    themselves to turn it into findings and write the record."""
    return min(60.0, max(5.0, seconds * 0.05))


@contextmanager
def hard_deadline(seconds: float, what: str) -> Iterator[None]:
    """Stop the block ``grace_for(seconds)`` after ``seconds`` with :class:`DeadlinePassed`.

    Only the main thread can take a signal: elsewhere (a test calling the service from a worker
    thread) the block runs unbounded, as it did before.
    """
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return
    limit = seconds + grace_for(seconds)

    def fire(_signum: int, _frame: FrameType | None) -> None:
        # Once: a second alarm would interrupt the clean-up the first one started.
        signal.setitimer(signal.ITIMER_REAL, 0)
        raise DeadlinePassed(
            f"{what}: the --deadline of {seconds:g} s passed ({limit:g} s with the grace for the "
            "verifier's own findings); stopped, nothing verified and no summary written"
        )

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
