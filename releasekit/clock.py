"""The wall clock, passed in: a library that stamps a time takes a ``Clock``; a command makes the real one.

Only when something happened is read from here (``started_at``, ``finishedOn``, ``time_verified``,
the date an allowlist entry is judged against). Durations and deadlines are not wall-clock readings:
they use ``time.monotonic()`` where they are measured (docs/architecture.md, "Effects passed in").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """This moment, timezone-aware, in UTC."""
        ...

    def today(self) -> dt.date:
        """Today's date where this host is (local time, as ``date.today()``)."""
        ...


@dataclass(frozen=True)
class SystemClock:
    """The host's clock: what every command makes at its edge."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def today(self) -> dt.date:
        return dt.date.today()


@dataclass(frozen=True)
class FixedClock:
    """A clock that always reads ``at`` (a test's, or a reproducible run's)."""

    at: dt.datetime

    def now(self) -> dt.datetime:
        return self.at.astimezone(dt.UTC)

    def today(self) -> dt.date:
        return self.at.date()
