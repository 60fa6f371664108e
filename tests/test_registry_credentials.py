"""Issue 34 item 4: registry credentials go only to the registry host they were set for.

Two real HTTP servers on 127.0.0.1 stand in for registries; each asks for Basic credentials and
records every Authorization header it is sent. The environment's credentials are bound to one of
them by RELEASEKIT_REGISTRY_HOST; the other (a host a staging.json or manifest could name) never
sees them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from releasekit.errors import EnvironmentProblem, InputError
from releasekit.registry import RegistryClient, resolve_credentials


class _Challenging(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[str] = []

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Challenging

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.seen.append(self.headers.get("Authorization", ""))
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="registry"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def registries() -> Iterator[tuple[_Challenging, _Challenging]]:
    servers = (_Challenging(), _Challenging())
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def _ping(host: str) -> None:
    with (
        RegistryClient(host, resolve_credentials(host), timeout=10) as client,
        pytest.raises(EnvironmentProblem),
    ):
        client.ping()


def test_credentials_reach_their_registry_and_no_other(
    registries: tuple[_Challenging, _Challenging], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    ours, attackers = registries
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # no `docker login` credentials either
    monkeypatch.setenv("RELEASEKIT_REGISTRY_USERNAME", "releaser")
    monkeypatch.setenv("RELEASEKIT_REGISTRY_PASSWORD", "Zk3yRegistryPassword")
    monkeypatch.setenv("RELEASEKIT_REGISTRY_HOST", ours.host)
    _ping(ours.host)
    _ping(attackers.host)
    assert any(header.startswith("Basic ") for header in ours.seen), ours.seen
    assert attackers.seen and not any(attackers.seen), attackers.seen


def test_credentials_without_their_host_are_refused_before_any_request(
    registries: tuple[_Challenging, _Challenging], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, _ = registries
    monkeypatch.setenv("RELEASEKIT_REGISTRY_USERNAME", "releaser")
    monkeypatch.setenv("RELEASEKIT_REGISTRY_PASSWORD", "Zk3yRegistryPassword")
    monkeypatch.delenv("RELEASEKIT_REGISTRY_HOST", raising=False)
    with pytest.raises(InputError, match="RELEASEKIT_REGISTRY_HOST is not"):
        resolve_credentials(ours.host)
    assert ours.seen == []
