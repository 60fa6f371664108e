"""The narrow adapter to the Docker Engine for publishing: inspect an image, push it.

Everything goes through the ``docker`` SDK. A push is always of a staging tag that names
the image ID, never of a release tag: release tags are put on the registry only after the
pushed manifest has been checked (see ``releasekit.publish.transaction``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from releasekit.errors import EnvironmentProblem, InputError
from releasekit.publish.registry import Reference, RegistryCredentials

STAGING_PREFIX = "releasekit-staging-"


class ImageFacts(BaseModel):
    """What the gate needs to know about a local image: its ID and its own runtime defaults."""

    id: str
    repo_tags: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    entrypoint: list[str] = Field(default_factory=list)
    cmd: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def from_config(cls, image_id: str, config: dict[str, Any], repo_tags: list[str] | None = None) -> ImageFacts:
        """Build from an image config's ``config`` section (engine inspect or registry blob)."""
        env: dict[str, str] = {}
        for item in config.get("Env") or []:
            key, _, value = str(item).partition("=")
            env[key] = value
        return cls(
            id=image_id,
            repo_tags=list(repo_tags or []),
            env=env,
            entrypoint=list(config.get("Entrypoint") or []),
            cmd=list(config.get("Cmd") or []),
            labels=dict(config.get("Labels") or {}),
        )


def staging_tag(image_id: str) -> str:
    return STAGING_PREFIX + image_id.removeprefix("sha256:")[:12]


class DockerEngine:
    def __init__(self) -> None:
        try:
            import docker

            self._docker = docker
            self.client = docker.from_env(timeout=600)
            self.client.ping()
        except Exception as exc:  # noqa: BLE001 - any failure here means "no usable engine"
            raise EnvironmentProblem(
                f"Docker Engine not reachable: {type(exc).__name__}", hint="is dockerd running? see DOCKER_HOST"
            ) from None

    def inspect(self, image: str) -> ImageFacts:
        try:
            obj = self.client.images.get(image)
        except self._docker.errors.ImageNotFound:
            raise InputError(f"image {image!r} not found in the local Docker Engine") from None
        except self._docker.errors.APIError as exc:
            raise EnvironmentProblem(f"Docker Engine could not inspect {image!r}: {exc.explanation}") from None
        return ImageFacts.from_config(obj.id, obj.attrs.get("Config") or {}, obj.tags)

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
        tag = staging_tag(image_id)
        repo = target.name
        try:
            self.client.api.tag(image_id, repo, tag)
        except self._docker.errors.APIError as exc:
            raise EnvironmentProblem(f"Docker Engine could not tag {image_id[:19]}: {exc.explanation}") from None
        auth = {"username": credentials.username, "password": credentials.password} if credentials else None
        digest: str | None = None
        try:
            stream = self.client.api.push(repo, tag=tag, stream=True, decode=True, auth_config=auth)
            for event in stream:
                if "error" in event or "errorDetail" in event:
                    detail = (event.get("errorDetail") or {}).get("message") or event.get("error")
                    raise EnvironmentProblem(f"push to {target.host} failed: {' '.join(str(detail).split())}")
                # The engine retries a failed layer upload for about a minute; if the registry
                # is gone, ``on_retry`` says so now (by raising) instead of after every retry.
                if on_retry is not None and str(event.get("status", "")).startswith("Retrying in"):
                    on_retry()
                aux = event.get("aux") or {}
                if aux.get("Digest"):
                    digest = aux["Digest"]
        except EnvironmentProblem:
            raise
        except self._docker.errors.APIError as exc:
            raise EnvironmentProblem(f"push to {target.host} failed: {exc.explanation}") from None
        except Exception as exc:  # noqa: BLE001 - the engine went away mid-stream
            raise EnvironmentProblem(
                f"push to {target.host} interrupted: the Docker Engine connection failed ({type(exc).__name__})"
            ) from None
        finally:
            # Best effort: an engine that died cannot untag, and that must not hide the real error.
            with contextlib.suppress(Exception):
                self.client.api.remove_image(f"{repo}:{tag}", noprune=True)
        if not digest:
            raise EnvironmentProblem(f"push to {target.host} ended without reporting a manifest digest")
        return digest
