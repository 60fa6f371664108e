"""The narrow adapter to the Docker Engine (always through the ``docker`` SDK).

Everything the build needs from the engine goes through here, so the rest of the build
never sees a ``docker`` exception: engine faults become EnvironmentProblem (exit 2) with
one line that says what to do.
"""

from __future__ import annotations

import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from releasekit.errors import EnvironmentProblem

START_HINT = "start the engine (scripts/setup.sh does) or point DOCKER_HOST at one"


@dataclass
class RunResult:
    exit_code: int
    output: str


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means the same thing to the user
        raise EnvironmentProblem(
            f"cannot reach the Docker Engine: {' '.join(str(exc).split())[:200]}", hint=START_HINT
        ) from None
    return client


class Engine:
    """The few engine operations a release build needs."""

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self.client = client or connect()

    def image_id(self, ref: str) -> str | None:
        """The local image ID (sha256 of its config) for a name, tag or ID; None if absent."""
        try:
            return str(self.client.images.get(ref).id)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"Docker Engine refused to inspect {ref}: {exc.explanation}") from None

    def image_attrs(self, ref: str) -> dict:
        try:
            return dict(self.client.images.get(ref).attrs)
        except docker.errors.ImageNotFound:
            raise EnvironmentProblem(f"image {ref} is not in the Docker Engine") from None

    def save(self, ref: str) -> Iterator[bytes]:
        """A ``docker save`` stream of one image."""
        return self.client.images.get(ref).save(named=False)

    def load(self, archive: Path) -> list[str]:
        """Load a ``docker save``-format tar; returns the IDs/tags the engine reports."""
        try:
            with archive.open("rb") as fh:
                images = self.client.images.load(fh)
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"Docker Engine could not load {archive.name}: {exc.explanation}") from None
        return [str(i.id) for i in images]

    def tag(self, image_id: str, tag: str) -> None:
        repo, _, name = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        self.client.images.get(image_id).tag(repo, name)

    def import_rootfs(self, tar_path: Path, repository: str, tag: str) -> str:
        """``docker import`` of a root filesystem tar; returns the new image ID."""
        try:
            self.client.api.import_image_from_file(str(tar_path), repository=repository, tag=tag)
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"docker import of {tar_path.name} failed: {exc.explanation}") from None
        found = self.image_id(f"{repository}:{tag}")
        if found is None:
            raise EnvironmentProblem(f"docker import did not produce {repository}:{tag}")
        return found

    def run_throwaway(
        self,
        image: str,
        command: list[str],
        *,
        inputs: dict[str, Path] | None = None,
        export: str | None = None,
        export_to: Path | None = None,
        environment: dict[str, str] | None = None,
    ) -> RunResult:
        """Run one command in a new container of ``image`` and always remove it.

        ``inputs`` maps a container directory to a host directory copied in before start;
        ``export`` is a container path streamed out as a tar to ``export_to`` after a
        successful run. No network: the release install never reaches an index.
        """
        container = self.client.containers.create(
            image, command, network_disabled=True, environment=environment or {}, user="0:0"
        )
        try:
            for dest, src in (inputs or {}).items():
                # Spooled to disk: a source tree (a vLLM checkout) can be large.
                with tempfile.TemporaryFile() as archive:
                    with tarfile.open(fileobj=archive, mode="w") as tar:
                        tar.add(str(src), arcname=dest.rsplit("/", 1)[1])
                    archive.seek(0)
                    container.put_archive(dest.rsplit("/", 1)[0] or "/", archive)
            container.start()
            status = container.wait()
            output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
            code = int(status.get("StatusCode", 1))
            if code == 0 and export and export_to is not None:
                stream, _ = container.get_archive(export)
                with export_to.open("wb") as fh:
                    for chunk in stream:
                        fh.write(chunk)
            return RunResult(code, output)
        finally:
            container.remove(force=True)


    def build_image(self, context: Path, dockerfile: str, *, tag: str, buildargs: dict[str, str]) -> tuple[str, str]:
        """``docker build`` of ``context`` (no pulls: bases must be local); returns (image ID, build log)."""
        lines: list[str] = []
        try:
            for chunk in self.client.api.build(
                path=str(context), dockerfile=dockerfile, tag=tag, buildargs=buildargs, rm=True, forcerm=True,
                pull=False, decode=True,
            ):
                if "stream" in chunk:
                    lines.append(str(chunk["stream"]))
                if "error" in chunk:
                    raise EnvironmentProblem(f"building {tag} failed: {' '.join(str(chunk['error']).split())[:300]}")
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"Docker Engine refused to build {tag}: {exc.explanation}") from None
        found = self.image_id(tag)
        if found is None:
            raise EnvironmentProblem(f"docker build did not produce {tag}")
        return found, "".join(lines)
