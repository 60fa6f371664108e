"""Publishing's use of the Docker Engine (through ``releasekit.docker_engine``): inspect an image, push it.

A push is always of a staging tag that names the image ID, never of a release tag: release
tags are put on the registry only after the pushed manifest has been checked (see
``releasekit.publish.transaction``, which also reads it back).
"""

from __future__ import annotations

from collections.abc import Callable

from releasekit.docker_engine import Engine, EngineError, ImageFacts, NoSuchImage
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.registry import Reference, RegistryCredentials

__all__ = ["STAGING_PREFIX", "DockerEngine", "ImageFacts", "staging_tag"]

STAGING_PREFIX = "releasekit-staging-"


def staging_tag(image_id: str) -> str:
    return STAGING_PREFIX + image_id.removeprefix("sha256:")[:12]


class DockerEngine:
    """Publishing's view of the engine the command connected to (600 s per call) and passed in."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def inspect(self, image: str) -> ImageFacts:
        try:
            return self.engine.inspect(image)
        except NoSuchImage:
            raise InputError(f"image {image!r} not found in the local Docker Engine") from None
        except EngineError as exc:
            raise EnvironmentProblem(
                f"Docker Engine could not inspect {image!r}: {exc.explanation}"
            ) from None

    def push_staged(
        self,
        image_id: str,
        target: Reference,
        credentials: RegistryCredentials | None,
        on_retry: Callable[[], None] | None = None,
    ) -> str:
        """Push the image under its staging tag and return the registry manifest digest.

        The local staging tag is removed again whatever happens: it is an implementation
        detail of the push, not something a user should find in ``docker images``.
        """
        auth = (credentials.username, credentials.password) if credentials else None
        return self.engine.push(
            image_id, target.name, staging_tag(image_id), where=target.host, auth=auth, on_retry=on_retry
        )

    def pull_back(
        self, target: Reference, digest: str, credentials: RegistryCredentials | None
    ) -> ImageFacts:
        """Pull ``REGISTRY/REPO@digest`` (a name only the digest makes: no tag is involved) and inspect it."""
        reference = f"{target.name}@{digest}"
        auth = (credentials.username, credentials.password) if credentials else None
        try:
            image_id = self.engine.pull(reference, auth=auth)
            return self.engine.inspect(image_id)
        except NoSuchImage:
            raise EnvironmentProblem(
                f"pull-back of {reference}: the registry does not serve it", hint="nothing was tagged"
            ) from None
        except EngineError as exc:
            raise EnvironmentProblem(
                f"pull-back of {reference} failed: {exc.explanation}", hint="nothing was tagged"
            ) from None
