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
from releasekit.registry import RegistryClient, resolve_credentials, token_service_refusal


class _Challenging(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[str] = []
        self.challenge = 'Basic realm="registry"'

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Challenging

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.seen.append(self.headers.get("Authorization", ""))
        self.send_response(401)
        self.send_header("WWW-Authenticate", self.server.challenge)
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


def test_a_token_service_elsewhere_gets_no_credentials_unless_named(
    registries: tuple[_Challenging, _Challenging], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """A registry's Bearer challenge names the realm the credentials are sent to: one on another host
    (here ``localhost``, the registry being ``127.0.0.1``) is refused, one line, and sees nothing,
    until RELEASEKIT_REGISTRY_TOKEN_SERVICES names it."""
    ours, tokens = registries
    tokens_port = tokens.server_address[1]
    ours.challenge = f'Bearer realm="http://localhost:{tokens_port}/token",service="registry"'
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.setenv("RELEASEKIT_REGISTRY_USERNAME", "releaser")
    monkeypatch.setenv("RELEASEKIT_REGISTRY_PASSWORD", "Zk3yRegistryPassword")
    monkeypatch.setenv("RELEASEKIT_REGISTRY_HOST", ours.host)
    monkeypatch.delenv("RELEASEKIT_REGISTRY_TOKEN_SERVICES", raising=False)
    with (
        RegistryClient(ours.host, resolve_credentials(ours.host), timeout=10) as client,
        pytest.raises(
            EnvironmentProblem, match="on another host .* the credentials were not sent"
        ) as refused,
    ):
        client.ping()
    assert "\n" not in str(refused.value)
    assert tokens.seen == []
    monkeypatch.setenv("RELEASEKIT_REGISTRY_TOKEN_SERVICES", "auth.example, localhost")
    _ping(ours.host)  # the token service answers 401 itself: no token, but it was asked
    assert any(header.startswith("Basic ") for header in tokens.seen), tokens.seen


@pytest.mark.parametrize(
    ("realm", "named", "refused"),
    [
        ("https://registry.example/token", "", None),  # the registry's own host, another port or path
        ("https://registry.example:8443/token", "", None),
        ("http://registry.example/token", "registry.example", "is not HTTPS"),
        ("https://auth.example/token", "", "does not name it"),
        ("https://auth.example/token", "auth.example", None),
        ("https://evil.example/token", "auth.example", "does not name it"),
        ("http://127.0.0.1:5001/token", "127.0.0.1", None),  # loopback: plain HTTP as for a registry
        ("", "", "is not HTTPS"),
    ],
)
def test_which_token_services_may_see_the_credentials(realm: str, named: str, refused: str | None) -> None:
    why = token_service_refusal(
        realm, "registry.example:443" if "127" not in realm else "127.0.0.1:5000", named
    )
    assert (why is None) if refused is None else (why is not None and refused in why), why
