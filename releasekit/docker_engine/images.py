"""Images in the engine: inspect (``ImageFacts``), exists, load, save, tag, remove, import."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from releasekit.docker_engine.errors import EngineError, NoSuchImage, explain
from releasekit.errors import EnvironmentProblem

if TYPE_CHECKING:
    import docker


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class ImageFacts(BaseModel):
    """What the engine (or a registry's image config) says about an image: trusted, not read from its files."""

    id: str
    tags: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    entrypoint: list[str] = Field(default_factory=list)
    cmd: list[str] = Field(default_factory=list)
    working_dir: str = ""
    user: str = ""
    repo_digests: list[str] = Field(
        default_factory=list, description="registry digests (sha256:...) the engine knows"
    )

    @classmethod
    def from_config(
        cls,
        image_id: str,
        config: dict[str, Any],
        tags: list[str] | None = None,
        repo_digests: list[str] | None = None,
    ) -> ImageFacts:
        """From an image config's ``config`` section (engine inspect ``Config`` or a registry config blob)."""
        env: dict[str, str] = {}
        for item in config.get("Env") or []:
            key, _, value = str(item).partition("=")
            env[key] = value
        return cls(
            id=image_id,
            tags=list(tags or []),
            labels=dict(config.get("Labels") or {}),
            env=env,
            entrypoint=_as_list(config.get("Entrypoint")),
            cmd=_as_list(config.get("Cmd")),
            working_dir=config.get("WorkingDir") or "",
            user=config.get("User") or "",
            repo_digests=list(repo_digests or []),
        )

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any]) -> ImageFacts:
        """From ``docker inspect`` of an image."""
        digests = [d.split("@", 1)[1] for d in attrs.get("RepoDigests") or [] if "@" in d]
        return cls.from_config(
            str(attrs["Id"]), attrs.get("Config") or {}, attrs.get("RepoTags") or [], digests
        )


class ImageOperations:
    """Image operations of ``Engine`` (``client`` is the SDK client)."""

    client: docker.DockerClient

    def _image(self, ref: str) -> Any:
        import docker.errors

        if not ref.strip():
            # The SDK answers an empty reference with NullResource, which no caller expects.
            raise NoSuchImage("'' (an empty image reference)")
        try:
            return self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            raise NoSuchImage(ref) from None
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def inspect(self, ref: str) -> ImageFacts:
        """Facts of one image by name, tag or ID; NoSuchImage or EngineError."""
        return ImageFacts.from_attrs(dict(self._image(ref).attrs))

    def find(self, ref: str) -> ImageFacts | None:
        """Facts of one image, or None when the engine has no such image."""
        try:
            return self.inspect(ref)
        except NoSuchImage:
            return None

    def exists(self, ref: str) -> bool:
        return self.image_id(ref) is not None

    def image_id(self, ref: str) -> str | None:
        """The local image ID (sha256 of its config) for a name, tag or ID; None if absent."""
        try:
            return str(self._image(ref).id)
        except NoSuchImage:
            return None
        except EngineError as exc:
            raise EnvironmentProblem(f"Docker Engine refused to inspect {ref}: {exc.explanation}") from None

    def image_attrs(self, ref: str) -> dict[str, Any]:
        """The raw ``docker inspect`` of an image (Size, RepoDigests, ...)."""
        try:
            return dict(self._image(ref).attrs)
        except NoSuchImage:
            raise EnvironmentProblem(f"image {ref} is not in the Docker Engine") from None

    def save(self, ref: str) -> Iterator[bytes]:
        """A ``docker save`` stream of one image."""
        return iter(self._image(ref).save(named=False))

    def load(self, archive: Path) -> list[str]:
        """Load a ``docker save``-format tar; returns the IDs the engine reports."""
        import docker.errors

        try:
            with archive.open("rb") as fh:
                images = self.client.images.load(fh)
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(
                f"Docker Engine could not load {archive.name}: {exc.explanation}"
            ) from None
        return [str(i.id) for i in images]

    def tag(self, image_id: str, tag: str) -> None:
        """Put ``tag`` (``repo[:name]``, default ``latest``) on an image."""
        import docker.errors

        repo, _, name = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        try:
            self.client.api.tag(image_id, repo, name)
        except docker.errors.ImageNotFound:
            raise NoSuchImage(image_id) from None
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def remove(self, ref: str, *, force: bool = False, noprune: bool = False) -> None:
        """Remove an image or one of its tags; an image already gone is fine."""
        import docker.errors

        try:
            self.client.api.remove_image(ref, force=force, noprune=noprune)
        except docker.errors.ImageNotFound:
            return
        except docker.errors.APIError as exc:
            raise EngineError(explain(exc)) from None

    def build_image(
        self, context: Path, dockerfile: str, *, tag: str, buildargs: dict[str, str]
    ) -> tuple[str, str]:
        """``docker build`` of ``context`` (no pulls: bases must be local); returns (image ID, build log)."""
        import docker.errors

        lines: list[str] = []
        try:
            for chunk in self.client.api.build(
                path=str(context),
                dockerfile=dockerfile,
                tag=tag,
                buildargs=buildargs,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            ):
                if "stream" in chunk:
                    lines.append(str(chunk["stream"]))
                if "error" in chunk:
                    raise EnvironmentProblem(
                        f"building {tag} failed: {' '.join(str(chunk['error']).split())[:300]}"
                    )
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"Docker Engine refused to build {tag}: {explain(exc)}") from None
        found = self.image_id(tag)
        if found is None:
            raise EnvironmentProblem(f"docker build did not produce {tag}")
        return found, "".join(lines)

    def import_rootfs(self, tar_path: Path, repository: str, tag: str) -> str:
        """``docker import`` of a root filesystem tar; returns the new image ID."""
        import docker.errors

        try:
            self.client.api.import_image_from_file(str(tar_path), repository=repository, tag=tag)
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"docker import of {tar_path.name} failed: {exc.explanation}") from None
        found = self.image_id(f"{repository}:{tag}")
        if found is None:
            raise EnvironmentProblem(f"docker import did not produce {repository}:{tag}")
        return found
