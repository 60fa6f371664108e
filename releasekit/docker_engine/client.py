"""Connecting to the Docker Engine: the one place a ``docker.DockerClient`` is made.

The SDK is imported inside the functions, never at module level: ``releasekit --help``
must not pay for importing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from releasekit.docker_engine.containers import ContainerOperations
from releasekit.docker_engine.errors import EngineUnreachable
from releasekit.docker_engine.images import ImageOperations
from releasekit.docker_engine.registry import RegistryOperations

if TYPE_CHECKING:
    import docker

START_HINT = "start the engine (scripts/setup.sh does) or point DOCKER_HOST at one"


def sdk_client(timeout: int = 600) -> docker.DockerClient:
    """A pinged SDK client for the engine at DOCKER_HOST; EngineUnreachable (exit 2) otherwise."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means the same thing to the user
        raise EngineUnreachable(
            f"cannot reach the Docker Engine: {' '.join(str(exc).split())[:200]}",
            hint=START_HINT,
            cause=type(exc).__name__,
        ) from None
    return client


class Engine(ImageOperations, ContainerOperations, RegistryOperations):
    """The Docker Engine as releasekit uses it: images, containers, export streams, registry push.

    ``client`` is the SDK client; only this package touches it.
    """

    def __init__(self, client: docker.DockerClient | None = None, *, timeout: int = 600) -> None:
        self.client = client if client is not None else sdk_client(timeout)

    def close(self) -> None:
        self.client.close()


def connect(timeout: int = 600) -> Engine:
    """The engine at DOCKER_HOST, reached and pinged; EngineUnreachable (exit 2) when it is not there."""
    return Engine(sdk_client(timeout))


class LazyEngine(Engine):
    """The engine reached (and pinged) on first use, then kept: what a command's edge hands a library
    that needs Docker on some paths only (a lock with no ``to-be-locked`` image, a test run its
    inputs stop first). An unreachable engine raises ``EngineUnreachable`` at that first use, as
    ``connect`` would have there, and is tried again at the next.
    """

    def __init__(self, *, timeout: int = 600) -> None:  # noqa: D107 - no super(): nothing is reached yet
        self.timeout = timeout
        self._client: docker.DockerClient | None = None

    @property  # type: ignore[override]
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = sdk_client(self.timeout)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
