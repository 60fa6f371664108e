"""A second Docker Engine on this machine, as a second host would have: nothing shared with the first.

Its own ``--data-root`` (no shared image store), ``--exec-root``, socket, pidfile and bridge;
iptables and masquerading off so the first engine's rules stay as they are (containers on it
are reached through published loopback ports, which the userland proxy serves). Stopped, and
its bridge removed, when the ``with`` block ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import docker


@dataclass(frozen=True)
class SecondEngine:
    root: Path
    socket: Path
    bridge: str

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        """What a releasekit process needs to run on this engine."""
        return {"DOCKER_HOST": self.url}

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, timeout=300)


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


@contextmanager
def second_engine(root: Path, index: int = 1) -> Iterator[SecondEngine]:
    if shutil.which("dockerd") is None:
        raise RuntimeError("dockerd is not installed (scripts/setup.sh installs docker.io)")
    root.mkdir(parents=True, exist_ok=True)
    bridge = f"rk2nd{os.getpid() % 10000}{index}"[:15]
    _ip("link", "add", "name", bridge, "type", "bridge")
    _ip("addr", "add", f"10.213.{index}.1/24", "dev", bridge)
    _ip("link", "set", bridge, "up")
    engine = SecondEngine(root=root, socket=root / "docker.sock", bridge=bridge)
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(
        [
            "dockerd",
            "--data-root",
            str(root / "data"),
            "--exec-root",
            str(root / "exec"),
            "--host",
            engine.url,
            "--pidfile",
            str(root / "docker.pid"),
            "--bridge",
            bridge,
            "--iptables=false",
            "--ip-masq=false",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = engine.client()
                client.ping()
                client.close()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "the second dockerd did not start: " + (root / "dockerd.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.5)
        yield engine
    finally:
        if proc.poll() is None:
            try:
                client = engine.client()
                for container in client.containers.list(all=True):
                    container.remove(force=True)
                client.close()
            except Exception:  # noqa: BLE001 - stopping the engine below removes what is left
                pass
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        _ip("link", "del", bridge, check=False)
        subprocess.run(["rm", "-rf", str(root / "data"), str(root / "exec")], check=False)
