"""How releasekit asks a running server whether it is healthy, and lets an exit settle.

One answer for both kinds of server a cell runs against: the single container
(``container.RunningServer``) and the topology of processes (``topology_run.TopologyServer``).
Each says for itself whether it is ``alive``; the probe and the settling wait are the same.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

import httpx

PROBE_TIMEOUT_S = 5.0
SETTLE_POLL_S = 0.25


def answers_ok(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when GET ``url`` answers 200; an unreachable server is simply not healthy."""
    try:
        return httpx.get(url, timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


class ServerHealth(ABC):
    """``healthy`` and ``settle`` for a server that knows its ``base_url`` and whether it is ``alive``."""

    base_url: str

    @abstractmethod
    def alive(self) -> tuple[bool, int | None]:
        """(False, exit code) once the server (or any process of it) has exited; (True, None) before."""

    def healthy(self, path: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
        return answers_ok(self.base_url + path, timeout_s)

    def settle(self, seconds: float = 5.0) -> tuple[bool, int | None]:
        """Alive after up to ``seconds``? The engine records an exit a moment after it happens."""
        deadline = time.monotonic() + seconds
        while True:
            alive, code = self.alive()
            if not alive or time.monotonic() > deadline:
                return alive, code
            time.sleep(SETTLE_POLL_S)


__all__ = ["PROBE_TIMEOUT_S", "ServerHealth", "answers_ok"]
