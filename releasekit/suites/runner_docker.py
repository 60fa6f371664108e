"""The test stage's container run, through the Docker adapter.

``run_in_image`` creates a container from an image with networking disabled (``network``: the
locked manifest grants the component's ``test`` one, Docker's default bridge), copies the
test files in (no bind mount: works with a remote engine too), starts it, kills it at
the timeout, copies the report files out, keeps the log tail, and removes the container.
The engine is the command's (``suites/commands.py`` makes it, with its 120 s timeout).

A suite is the component's code (issue 43): it runs as ``nobody`` with every capability
dropped, ``no-new-privileges`` and a process limit; its only writable places besides the
image's world-writable ones (``/tmp``) are the directories ``writable`` names, made empty and
owned by that user before it starts; its environment is the one the caller gives, nothing of
the host's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from releasekit.docker_engine import (
    Container,
    ContainerSpec,
    ContainerTimeout,
    Engine,
    EngineError,
    NoSuchImage,
)
from releasekit.errors import EnvironmentProblem

_LOG_TAIL = 20_000
SUITE_USER = "65534:65534"  # nobody


@dataclass
class ContainerRun:
    exit_code: int | None
    timed_out: bool
    logs: str
    seconds: float
    files: dict[str, bytes] = field(default_factory=dict)  # container path -> content (those that existed)


def image_id(engine: Engine, ref: str) -> str | None:
    """The local engine's ID of ``ref``, or None when the image is not there."""
    return engine.image_id(ref)


def _create(engine: Engine, spec: ContainerSpec) -> Container:
    try:
        return engine.create(spec)
    except NoSuchImage:
        raise EnvironmentProblem(f"image {spec.image} is not in the local Docker Engine") from None
    except EngineError as exc:
        raise EnvironmentProblem(f"cannot create a container from {spec.image}: {exc}") from None


def run_in_image(
    engine: Engine,
    image: str,
    command: list[str],
    *,
    source: Path | None = None,
    source_dest: str = "/releasekit/src",
    workdir: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 1800,
    gpus: int = 0,
    devices: list[str] | None = None,
    collect: list[str] | None = None,
    writable: list[str] | None = None,
    network: bool = False,
) -> ContainerRun:
    """Run ``command`` in ``image`` as ``nobody``, with no network unless ``network`` (granted); kill it
    after ``timeout`` seconds."""
    container = _create(
        engine,
        ContainerSpec(
            image,
            command=command,
            workdir=workdir,
            environment=env or {},
            user=SUITE_USER,
            network=network,
            labels={"io.releasekit.stage": "test"},
            gpu_count=gpus,
            devices=devices or [],
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=4096,
        ),
    )
    started = time.monotonic()
    timed_out = False
    exit_code: int | None = None
    files: dict[str, bytes] = {}
    try:
        if writable:
            container.make_directories(writable, SUITE_USER)
        if source is not None:
            container.put_directory(source_dest, source)
        container.start()
        try:
            exit_code = container.wait(timeout)
        except ContainerTimeout:
            timed_out = True
            container.kill()
            container.wait(60)
        seconds = time.monotonic() - started
        logs = container.logs().decode("utf-8", "replace")[-_LOG_TAIL:]
        for path in collect or []:
            content = container.read_file(path)
            if content is not None:
                files[path] = content
    finally:
        container.remove()
    return ContainerRun(exit_code=exit_code, timed_out=timed_out, logs=logs, seconds=seconds, files=files)
