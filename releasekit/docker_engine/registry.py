"""Registries as the engine sees them: push, pull, and the credentials of ``docker login``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from releasekit.docker_engine.errors import EngineError, NoSuchImage, explain
from releasekit.errors import EnvironmentProblem

if TYPE_CHECKING:
    import docker

    from releasekit.docker_engine.images import ImageFacts


def config_credentials(host: str) -> tuple[str, str] | None:
    """(username, password) that ``docker login`` stored for ``host``; None when there are none.

    A broken Docker config means "no credentials", not a crash.
    """
    try:
        from docker import auth as docker_auth

        entry = docker_auth.resolve_authconfig(docker_auth.load_config(), host)
    except Exception:  # noqa: BLE001
        return None
    if entry and entry.get("username") and entry.get("password"):
        return str(entry["username"]), str(entry["password"])
    return None


class RegistryOperations:
    """Registry operations of ``Engine`` (``client`` is the SDK client)."""

    client: docker.DockerClient

    if TYPE_CHECKING:  # ImageOperations's, beside this in ``Engine``

        def inspect(self, ref: str) -> ImageFacts: ...

        def tag(self, image_id: str, tag: str) -> None: ...

    def push(
        self,
        image_id: str,
        repository: str,
        tag: str,
        *,
        where: str,
        auth: tuple[str, str] | None = None,
        on_retry: Callable[[], None] | None = None,
        keep_tag: bool = False,
    ) -> str:
        """Tag ``image_id`` as ``repository:tag``, push it and return the manifest digest the engine reports.

        ``where`` names the registry in messages. Unless ``keep_tag``, the local tag is removed
        again whatever happens, except when it is the image's only name: the engine would then
        delete the image itself (an untagged build, e.g. ``build`` without ``--tag``, whose ID the
        next job on the same host still needs), so the tag stays and names what was pushed.
        The engine retries a failed layer upload for about a minute; ``on_retry`` is called on
        each retry and may raise to stop waiting.
        """
        import docker.errors

        had_names = self._tag_for_push(image_id, repository, tag)
        auth_config = {"username": auth[0], "password": auth[1]} if auth else None
        digest: str | None = None
        try:
            stream = self.client.api.push(
                repository, tag=tag, stream=True, decode=True, auth_config=auth_config
            )
            for event in stream:
                if "error" in event or "errorDetail" in event:
                    detail = (event.get("errorDetail") or {}).get("message") or event.get("error")
                    raise EnvironmentProblem(f"push to {where} failed: {' '.join(str(detail).split())}")
                if on_retry is not None and str(event.get("status", "")).startswith("Retrying in"):
                    on_retry()
                aux = event.get("aux") or {}
                if aux.get("Digest"):
                    digest = aux["Digest"]
        except EnvironmentProblem:
            raise
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"push to {where} failed: {exc.explanation}") from None
        except Exception as exc:  # noqa: BLE001 - the engine went away mid-stream
            raise EnvironmentProblem(
                f"push to {where} interrupted: the Docker Engine connection failed ({type(exc).__name__})"
            ) from None
        finally:
            if not keep_tag and had_names:
                # Best effort: an engine that died cannot untag, and that must not hide the real error.
                with contextlib.suppress(Exception):
                    self.client.api.remove_image(f"{repository}:{tag}", noprune=True)
        if not digest:
            raise EnvironmentProblem(f"push to {where} ended without reporting a manifest digest")
        return digest

    def _tag_for_push(self, image_id: str, repository: str, tag: str) -> bool:
        """Tag ``image_id`` as ``repository:tag``; whether it had a name before."""
        try:
            had_names = bool(self.inspect(image_id).tags)
            self.tag(image_id, f"{repository}:{tag}")
        except NoSuchImage:
            raise
        except EngineError as exc:
            raise EnvironmentProblem(
                f"Docker Engine could not tag {image_id[:19]}: {exc.explanation}"
            ) from None
        return had_names

    def pull(self, reference: str, *, auth: tuple[str, str] | None = None) -> str:
        """Pull ``reference`` (``name:tag`` or ``name@digest``); returns the local image ID."""
        import docker.errors

        auth_config = {"username": auth[0], "password": auth[1]} if auth else None
        try:
            image = self.client.images.pull(reference, auth_config=auth_config)
        except docker.errors.ImageNotFound:
            raise NoSuchImage(reference) from None
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None
        return str(image.id)
