"""The test stage's few Docker Engine calls, in one place (to move into the Docker adapter).

``run_in_image`` creates a container from an image with networking disabled, copies the
test files in (no bind mount: works with a remote engine too), starts it, kills it at
the timeout, copies the report files out, keeps the log tail, and removes the container.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from releasekit.errors import EnvironmentProblem

_LOG_TAIL = 20_000


@dataclass
class ContainerRun:
    exit_code: int | None
    timed_out: bool
    logs: str
    seconds: float
    files: dict[str, bytes] = field(default_factory=dict)  # container path -> content (those that existed)


def _client() -> Any:
    try:
        import docker

        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - any failure means the engine cannot be used
        raise EnvironmentProblem(f"no Docker Engine reachable: {type(exc).__name__}: {exc}") from None


def image_id(ref: str) -> str | None:
    """The local engine's ID of ``ref``, or None when the image is not there."""
    import docker.errors

    client = _client()
    try:
        return str(client.images.get(ref).id)
    except docker.errors.ImageNotFound:
        return None
    finally:
        client.close()


def _tar_of(tree: Path, dest: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(tree), arcname=dest.strip("/"), recursive=True)
    return buf.getvalue()


def _first_file(stream: Any) -> bytes | None:
    data = b"".join(stream)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            if member.isfile():
                handle = tar.extractfile(member)
                return handle.read() if handle else None
    return None


def run_in_image(
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
) -> ContainerRun:
    """Run ``command`` in ``image`` with no network; kill it after ``timeout`` seconds."""
    import docker.errors
    import docker.types
    import requests.exceptions

    client = _client()
    kwargs: dict[str, Any] = {}
    if gpus:
        kwargs["device_requests"] = [docker.types.DeviceRequest(count=gpus, capabilities=[["gpu"]])]
    if devices:
        kwargs["devices"] = [f"{d}:{d}:rwm" for d in devices]
    try:
        container = client.containers.create(
            image, command, working_dir=workdir, environment=env or {}, network_mode="none",
            detach=True, labels={"io.releasekit.stage": "test"}, **kwargs,
        )
    except docker.errors.ImageNotFound:
        client.close()
        raise EnvironmentProblem(f"image {image} is not in the local Docker Engine") from None
    except docker.errors.APIError as exc:
        client.close()
        raise EnvironmentProblem(f"cannot create a container from {image}: {exc.explanation or exc}") from None
    started = time.monotonic()
    timed_out = False
    exit_code: int | None = None
    files: dict[str, bytes] = {}
    try:
        if source is not None:
            container.put_archive("/", _tar_of(source, source_dest))
        container.start()
        try:
            result = container.wait(timeout=timeout)
            exit_code = int(result.get("StatusCode", -1))
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            timed_out = True
            with contextlib.suppress(docker.errors.APIError):
                container.kill()
            container.wait(timeout=60)
        seconds = time.monotonic() - started
        logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")[-_LOG_TAIL:]
        for path in collect or []:
            try:
                stream, _ = container.get_archive(path)
            except docker.errors.NotFound:
                continue
            content = _first_file(stream)
            if content is not None:
                files[path] = content
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)
        client.close()
    return ContainerRun(exit_code=exit_code, timed_out=timed_out, logs=logs, seconds=seconds, files=files)
