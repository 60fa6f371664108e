"""Builder images as code: the manifest names a builder by image name, digest and Dockerfile (dockerfiles/).

``ensure_builder`` finds the builder in the Docker Engine, or builds it from its
Dockerfile when absent (no pulls: its base must be in the engine), then checks it
against what the manifest pins and what the lock recorded. The build context is a
fresh directory holding only the Dockerfile and the manifest's declared ``context``
directories, so nothing else of the checkout reaches the builder.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from releasekit.atomic import write_atomic
from releasekit.builder.wheel import Builder
from releasekit.digests import file_sha256
from releasekit.docker_engine import Engine
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.manifest import TO_BE_LOCKED
from releasekit.manifest.models import BuildEnvironment
from releasekit.records.lock import LockedBuilder


def dockerfile_path(environment: BuildEnvironment, manifest_dir: Path) -> Path | None:
    return (manifest_dir / environment.dockerfile) if environment.dockerfile else None


# Context directories every builder build has, empty unless the manifest's build.environment.context
# gives them: a CUDA toolkit (when the base has none) and a wheelhouse of the builder's pins.
CONTEXT_DIRS = ("toolkit", "wheels")


def base_image_arg(environment: BuildEnvironment, locked: LockedBuilder | None) -> str | None:
    """The BASE_IMAGE build ARG: name@registry-digest, or the local image ID the lock recorded."""
    if locked is not None and locked.base is not None:
        if locked.base.digest:
            return f"{locked.base.name.split('@')[0]}@{locked.base.digest}"
        return locked.base.image_id or locked.base.name
    base = environment.base
    if base is None:
        return None
    return f"{base.name}@{base.digest}" if base.digest != TO_BE_LOCKED else base.name


def build_args(environment: BuildEnvironment, locked: LockedBuilder | None) -> dict[str, str]:
    args = dict(environment.build_args)
    base = base_image_arg(environment, locked)
    if base:
        args["BASE_IMAGE"] = base
    return args


def build_from_dockerfile(
    engine: Engine,
    environment: BuildEnvironment,
    manifest_dir: Path,
    log: Path | None = None,
    locked: LockedBuilder | None = None,
) -> str:
    """Build the builder image from its Dockerfile, tagged with its name; returns the image ID."""
    assert environment.image is not None
    dockerfile = dockerfile_path(environment, manifest_dir)
    if dockerfile is None or not dockerfile.is_file():
        raise InputError(f"builder {environment.image}: Dockerfile {environment.dockerfile} not found")
    with tempfile.TemporaryDirectory(prefix="releasekit-builder-") as tmp:
        context = Path(tmp)
        shutil.copyfile(dockerfile, context / "Dockerfile")
        for name, where in environment.context.items():
            src = Path(where) if Path(where).is_absolute() else manifest_dir / where
            if not src.is_dir() or "/" in name or name in ("", ".", "..", "Dockerfile"):
                raise InputError(f"builder {environment.image}: context {name}: {where} is not a directory")
            shutil.copytree(src, context / name, symlinks=True)
        for name in CONTEXT_DIRS:
            (context / name).mkdir(exist_ok=True)
        image_id, output = engine.build_image(
            context, "Dockerfile", tag=environment.image, buildargs=build_args(environment, locked)
        )
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(log, output)
    return image_id


def ensure_builder(
    engine: Engine,
    component: str,
    environment: BuildEnvironment,
    manifest_dir: Path,
    locked: LockedBuilder | None = None,
    *,
    log: Path | None = None,
) -> Builder | None:
    """The manifest's builder image as a local image ID (None: a venv build); built when absent and it has a Dockerfile."""
    if environment.kind != "image":
        return None
    assert environment.image is not None
    pinned = environment.digest if environment.digest and environment.digest != TO_BE_LOCKED else None
    pinned = pinned or (locked.digest if locked else None) or (locked.image_id if locked else None)
    dockerfile = dockerfile_path(environment, manifest_dir)
    if locked and locked.dockerfile_sha256 and dockerfile is not None and dockerfile.is_file():
        now = file_sha256(dockerfile)
        if now != locked.dockerfile_sha256:
            raise InputError(
                f"{component}: {environment.dockerfile} changed since the lock (sha256 {now[:12]}, "
                f"locked {locked.dockerfile_sha256[:12]})",
                hint="run `releasekit plan lock` again",
            )
    image_id = engine.image_id(environment.image)
    if image_id is None and pinned:
        image_id = engine.image_id(pinned)
    if image_id is None and environment.dockerfile:
        image_id = build_from_dockerfile(engine, environment, manifest_dir, log, locked)
    if image_id is None:
        raise EnvironmentProblem(
            f"{component}: builder image {environment.image} is not in the Docker Engine",
            hint="build or load it (or name its Dockerfile in build.environment.dockerfile), then rerun",
        )
    if pinned and image_id != pinned:
        repo_digests = [
            d.split("@", 1)[1] for d in engine.image_attrs(image_id).get("RepoDigests") or [] if "@" in d
        ]
        if pinned not in repo_digests:
            raise EnvironmentProblem(
                f"{component}: builder image {environment.image} is {image_id[:19]}, the manifest or lock pins {pinned[:19]}"
            )
    return Builder(engine=engine, name=environment.image, image_id=image_id)
