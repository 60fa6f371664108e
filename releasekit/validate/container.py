"""The Docker adapter: one engine server in one container of the candidate image.

Everything goes through ``releasekit.docker_engine``. The server gets a deadline to become
healthy, its log is kept, and the container is removed whatever happens (the
``with`` block), so a failed, crashed or hung server never outlives the cell. The engine is
the command's (``validate/commands.py`` makes it, with a 60 s timeout).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from pydantic import BaseModel, Field

from releasekit.docker_engine import Container, ContainerSpec, Engine, NoSuchImage
from releasekit.errors import InputError
from releasekit.validate.health import ServerHealth

LABEL = "io.releasekit.validate.cell"


class ServerFailed(Exception):
    """The server did not become ready or died: the cell fails with this reason and the log tail."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ServerSpec(BaseModel):
    image: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    port: int = 8000
    gpus: list[int] = Field(default_factory=list)
    mounts: dict[str, str] = Field(
        default_factory=dict, description="host path -> container path (read-only)"
    )
    shm_size: str = "2g"
    cell_id: str
    cpuset: str | None = None
    nano_cpus: int | None = Field(
        default=None, description="a CPU quota (Docker NanoCpus); a benchmark or test slows one side with it"
    )


def image_facts(engine: Engine, image: str) -> tuple[str, dict[str, str]]:
    """(image id, the image's own ENV) — the ENV is part of what the server runs with."""
    try:
        facts = engine.inspect(image)
    except NoSuchImage:
        raise InputError(f"image '{image}' is not in the local Docker Engine") from None
    return facts.id, facts.env


class RunningServer(ServerHealth):
    def __init__(self, container: Container, spec: ServerSpec) -> None:
        self.container = container
        self.spec = spec
        self.base_url = ""

    def _host_port(self) -> int:
        port = self.container.host_port(self.spec.port)
        if port is None:
            status, _ = self.container.state()
            raise ServerFailed("SERVER_EXITED", f"the container has no published port (status {status})")
        return port

    def alive(self) -> tuple[bool, int | None]:
        status, code = self.container.state()
        if status in ("exited", "dead"):
            return False, code
        return True, None

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
            if self.base_url and all(self.healthy(p) for p in paths):
                return time.monotonic() - start
            if time.monotonic() - start > deadline_s:
                raise ServerFailed(
                    "SERVER_NOT_READY",
                    f"the server was not ready within {deadline_s:.0f} s ({' and '.join(paths)})",
                )
            time.sleep(1.0)

    def run_inside(self, argv: list[str], timeout_s: float) -> tuple[int, str]:
        """``argv`` run in the server's own container (a tool of the image against the live server)."""
        result = self.container.exec(argv, timeout_s=timeout_s)
        return result.exit_code, result.output

    def logs(self) -> str:
        try:
            return self.container.logs().decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - a vanished container has no log to give
            return ""


@contextmanager
def serve(engine: Engine, spec: ServerSpec) -> Iterator[RunningServer]:
    """The server's container, started; EngineError when the engine refuses it (no GPU runtime)."""
    container = engine.create(
        ContainerSpec(
            spec.image,
            entrypoint=spec.argv[:1],
            command=spec.argv[1:],
            environment=spec.env,
            publish_port=spec.port,
            read_only_mounts=spec.mounts,
            labels={LABEL: spec.cell_id},
            gpus=spec.gpus,
            # NCCL between the TP ranks of one server needs the host IPC namespace.
            ipc_mode="host" if spec.gpus else None,
            shm_size=None if spec.gpus else spec.shm_size,
            cpuset=spec.cpuset,
            nano_cpus=spec.nano_cpus,
        )
    )
    try:
        # Created and started separately: a start the engine refuses (no GPU runtime) must
        # not leave a created container behind.
        container.start()
        yield RunningServer(container, spec)
    finally:
        # Already gone is fine; anything else cannot be fixed from here.
        container.remove(volumes=True)
