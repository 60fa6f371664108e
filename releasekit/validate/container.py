"""The Docker adapter: one engine server in one container of the candidate image.

Everything goes through the ``docker`` SDK. The server gets a deadline to become
healthy, its log is kept, and the container is removed whatever happens (the
``with`` block), so a failed, crashed or hung server never outlives the cell.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import httpx
from pydantic import BaseModel, Field

from releasekit.errors import EnvironmentProblem, InputError

LABEL = "io.releasekit.validate.cell"


class ServerFailed(Exception):
    """The server did not become ready or died: the cell fails with this reason and the log tail."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ContainerSpec(BaseModel):
    image: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    port: int = 8000
    gpus: list[int] = Field(default_factory=list)
    mounts: dict[str, str] = Field(default_factory=dict, description="host path -> container path (read-only)")
    shm_size: str = "2g"
    cell_id: str
    cpuset: str | None = None


def docker_client():  # -> docker.DockerClient; typed loosely to keep the import lazy
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means "no usable engine"
        raise EnvironmentProblem(f"no Docker Engine reachable: {' '.join(str(exc).split())[:200]}") from None
    return client


def image_facts(client, image: str) -> tuple[str, dict[str, str]]:
    """(image id, the image's own ENV) — the ENV is part of what the server runs with."""
    import docker.errors

    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise InputError(f"image '{image}' is not in the local Docker Engine") from None
    env: dict[str, str] = {}
    for item in img.attrs.get("Config", {}).get("Env") or []:
        name, _, value = item.partition("=")
        env[name] = value
    return img.id, env


class RunningServer:
    def __init__(self, container, spec: ContainerSpec) -> None:
        self.container = container
        self.spec = spec
        self.base_url = ""

    def _host_port(self) -> int:
        self.container.reload()
        bindings = (self.container.attrs.get("NetworkSettings", {}).get("Ports") or {}).get(f"{self.spec.port}/tcp")
        if not bindings:
            raise ServerFailed("SERVER_EXITED", f"the container has no published port (status {self.container.status})")
        return int(bindings[0]["HostPort"])

    def alive(self) -> tuple[bool, int | None]:
        self.container.reload()
        if self.container.status in ("exited", "dead"):
            return False, self.container.attrs.get("State", {}).get("ExitCode")
        return True, None

    def healthy(self, path: str, timeout_s: float = 5.0) -> bool:
        try:
            return httpx.get(self.base_url + path, timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False

    def settle(self, seconds: float = 5.0) -> tuple[bool, int | None]:
        """Alive after up to ``seconds``? The engine records an exit a moment after it happens."""
        deadline = time.monotonic() + seconds
        while True:
            alive, code = self.alive()
            if not alive or time.monotonic() > deadline:
                return alive, code
            time.sleep(0.25)

    def wait_ready(self, paths: list[str], deadline_s: float) -> float:
        """Seconds until every path answered 200; ServerFailed when it exits or the deadline passes."""
        start = time.monotonic()
        while True:
            alive, code = self.alive()
            if not alive:
                raise ServerFailed("SERVER_EXITED", f"the server exited with code {code} before it was ready")
            if not self.base_url:
                with suppress(ServerFailed):
                    self.base_url = f"http://127.0.0.1:{self._host_port()}"
            if self.base_url:
                try:
                    if all(httpx.get(self.base_url + p, timeout=5).status_code == 200 for p in paths):
                        return time.monotonic() - start
                except httpx.HTTPError:
                    pass
            if time.monotonic() - start > deadline_s:
                raise ServerFailed(
                    "SERVER_NOT_READY", f"the server was not ready within {deadline_s:.0f} s ({' and '.join(paths)})"
                )
            time.sleep(1.0)

    def logs(self) -> str:
        try:
            return self.container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - a vanished container has no log to give
            return ""


@contextmanager
def serve(client, spec: ContainerSpec) -> Iterator[RunningServer]:
    from docker.types import DeviceRequest

    kwargs: dict[str, object] = {}
    if spec.gpus:
        kwargs["device_requests"] = [DeviceRequest(device_ids=[str(g) for g in spec.gpus], capabilities=[["gpu"]])]
        # NCCL between the TP ranks of one server needs the host IPC namespace.
        kwargs["ipc_mode"] = "host"
    else:
        kwargs["shm_size"] = spec.shm_size
    if spec.cpuset:
        kwargs["cpuset_cpus"] = spec.cpuset
    container = client.containers.create(
        spec.image,
        entrypoint=spec.argv[:1],
        command=spec.argv[1:],
        environment=spec.env,
        ports={f"{spec.port}/tcp": ("127.0.0.1", None)},
        volumes={host: {"bind": inside, "mode": "ro"} for host, inside in spec.mounts.items()},
        labels={LABEL: spec.cell_id},
        **kwargs,
    )
    try:
        # Created and started separately: a start the engine refuses (no GPU runtime) must
        # not leave a created container behind.
        container.start()
        yield RunningServer(container, spec)
    finally:
        # Already gone is fine; anything else cannot be fixed from here.
        with suppress(Exception):
            container.remove(force=True, v=True)
