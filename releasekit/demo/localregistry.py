"""A throw-away OCI registry on loopback: Debian's ``docker-registry`` (distribution v2.8).

Used by the tests and by ``releasekit demo`` so that publishing is exercised against a real
registry. It gets its own config (the packaged one listens on every interface with a
system-wide htpasswd file), storage in a directory the caller owns, and optional htpasswd
bcrypt auth. Stopping and starting it again on the same root keeps every blob and tag,
which is how the tests model a registry that dies mid-push and comes back.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from releasekit.errors import EnvironmentProblem

REGISTRY_BINARY = "docker-registry"
HTPASSWD_BINARY = "htpasswd"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str


@dataclass(frozen=True)
class TokenAuth:
    """Bearer-token auth (what Docker Hub, GHCR and Harbor use): the registry trusts tokens
    signed by a key whose certificate is in ``rootcertbundle`` and sends clients to ``realm``."""

    realm: str
    service: str
    issuer: str
    rootcertbundle: Path


@dataclass
class LocalRegistry:
    """A running (or stopped) local registry. ``host`` is what goes in image references."""

    root: Path
    port: int
    credentials: Credentials | None = None
    token: TokenAuth | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    @property
    def log_path(self) -> Path:
        return self.root / "registry.log"

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        config = self.root / "config.yml"
        config.write_text(_config_yaml(self), encoding="utf-8")
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(  # noqa: S603 - fixed binary, our own config
                [REGISTRY_BINARY, "serve", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        self._wait_ready()

    def kill(self) -> None:
        """Stop it abruptly (SIGKILL), as a crash or a pulled cable would."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: signal.Signals) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise EnvironmentProblem(
                    f"local registry exited with code {self.process.returncode}; see {self.log_path}"
                )
            try:
                # 200 without auth, 401 with it: either way it is serving the v2 API.
                if httpx.get(f"{self.url}/v2/", timeout=1.0).status_code in (200, 401):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise EnvironmentProblem(f"local registry on {self.host} did not answer within {timeout:.0f}s")


def _config_yaml(reg: LocalRegistry) -> str:
    # JSON strings are valid YAML scalars, so quoting paths this way is safe for any path.
    lines = [
        "version: 0.1",
        "log:",
        "  level: warn",
        "  accesslog:",
        "    disabled: true",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {json.dumps(str(reg.storage))}",
        "  delete:",
        "    enabled: true",
        "http:",
        f"  addr: {json.dumps(reg.host)}",
    ]
    if reg.token is not None:
        lines += [
            "auth:",
            "  token:",
            f"    realm: {json.dumps(reg.token.realm)}",
            f"    service: {json.dumps(reg.token.service)}",
            f"    issuer: {json.dumps(reg.token.issuer)}",
            f"    rootcertbundle: {json.dumps(str(reg.token.rootcertbundle))}",
        ]
    elif reg.credentials is not None:
        lines += [
            "auth:",
            "  htpasswd:",
            "    realm: releasekit-local",
            f"    path: {json.dumps(str(reg.root / 'htpasswd'))}",
        ]
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_htpasswd(path: Path, credentials: Credentials) -> None:
    """bcrypt entries only: distribution's htpasswd auth accepts nothing else."""
    if shutil.which(HTPASSWD_BINARY) is None:
        raise EnvironmentProblem("htpasswd not found", hint="apt-get install apache2-utils")
    # -i reads the password from stdin so it never shows up in a process listing.
    proc = subprocess.run(  # noqa: S603
        [HTPASSWD_BINARY, "-B", "-i", "-c", str(path), credentials.username],
        input=credentials.password.encode(),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise EnvironmentProblem(f"htpasswd failed: {proc.stderr.decode(errors='replace').strip()}")


@contextlib.contextmanager
def start_local_registry(
    root: Path,
    port: int | None = None,
    htpasswd: Credentials | None = None,
    token: TokenAuth | None = None,
) -> Iterator[LocalRegistry]:
    """Run a registry on 127.0.0.1 with storage under ``root``; stop it on exit.

    ``htpasswd`` turns on basic auth with that one user; ``token`` turns on bearer-token
    auth instead (the token service is the caller's). The registry keeps its data in
    ``root/storage`` after it stops, so a second start on the same root sees the same blobs.
    """
    if htpasswd is not None and token is not None:
        raise ValueError("a registry has one auth method: htpasswd or token")
    if shutil.which(REGISTRY_BINARY) is None:
        raise EnvironmentProblem("docker-registry not found", hint="apt-get install docker-registry")
    root.mkdir(parents=True, exist_ok=True)
    reg = LocalRegistry(root=root, port=port or free_port(), credentials=htpasswd, token=token)
    reg.storage.mkdir(exist_ok=True)
    if htpasswd is not None:
        write_htpasswd(root / "htpasswd", htpasswd)
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


def registry_available() -> bool:
    return shutil.which(REGISTRY_BINARY) is not None and os.name == "posix"
