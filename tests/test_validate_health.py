"""The one health helper both servers use: a real HTTP server on 127.0.0.1, a server that exits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from releasekit.validate.container import RunningServer
from releasekit.validate.health import ServerHealth, answers_ok
from releasekit.validate.topology_run import TopologyServer


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path == "/health" else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Exits(ServerHealth):
    """Alive until ``exit_at``, then exited with code 3."""

    def __init__(self, base_url: str, exit_at: float) -> None:
        self.base_url = base_url
        self.exit_at = exit_at

    def alive(self) -> tuple[bool, int | None]:
        return (True, None) if time.monotonic() < self.exit_at else (False, 3)


def test_healthy_is_a_200_and_nothing_else(http_url):
    server = _Exits(http_url, exit_at=time.monotonic() + 60)
    assert server.healthy("/health")
    assert not server.healthy("/not-ready")
    assert not answers_ok("http://127.0.0.1:9/health", timeout_s=0.5)  # nothing listens: not healthy


def test_settle_returns_the_exit_as_soon_as_it_is_seen():
    server = _Exits("http://127.0.0.1:9", exit_at=time.monotonic() + 0.3)
    start = time.monotonic()
    assert server.settle(seconds=5.0) == (False, 3)
    assert time.monotonic() - start < 2.0


def test_settle_gives_up_waiting_on_a_live_server():
    server = _Exits("http://127.0.0.1:9", exit_at=time.monotonic() + 60)
    start = time.monotonic()
    assert server.settle(seconds=0.3) == (True, None)
    assert time.monotonic() - start >= 0.3


def test_both_servers_share_the_one_helper():
    for cls in (RunningServer, TopologyServer):
        assert issubclass(cls, ServerHealth)
        assert cls.healthy is ServerHealth.healthy and cls.settle is ServerHealth.settle
