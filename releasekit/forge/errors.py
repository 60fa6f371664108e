"""What can go wrong talking to a forge, as one line each (exit 2 where they surface)."""

from __future__ import annotations

from releasekit.errors import EnvironmentProblem


class ForgeUnreachable(EnvironmentProblem):
    """No answer at all (DNS, connection refused, timeout): the lock records forge data as absent."""


class ForgeFailed(EnvironmentProblem):
    """The forge answered, but not usefully: rate limit past the bound, 5xx after retries, bad token."""
