"""The release image as a library: the locked base, the component wheels, the wheels layer, its settings.

``builder/service.py`` (``releasekit build``) and the verifiers (``provenance/reproduce.py``)
run the same steps through here, so a reproduction is the build's own code, not a copy of
it. Every step reads one frozen ``BuildRun``, gathered and checked once by its caller.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from releasekit import atomic
from releasekit.builder import dockerfile, stamp
from releasekit.builder.builders import ensure_builder
from releasekit.builder.cache import BuildCache, wheel_key
from releasekit.builder.image import LAYER_FORMAT, SmokeReport, WheelInput, install_layer
from releasekit.builder.labels import image_labels
from releasekit.builder.stamp import Modification
from releasekit.builder.wheel import Builder as WheelBuilder
from releasekit.builder.wheel import BuiltWheel, Log, build_wheel
from releasekit.builder.wheelhouse import fetch_pinned_wheel
from releasekit.digests import file_sha256
from releasekit.docker_engine import Engine
from releasekit.errors import BuildFailed, EnvironmentProblem, InputError
from releasekit.git import Mirror, fresh_checkout
from releasekit.git.tree import work_tree_status
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import GitComponent, WheelComponent
from releasekit.records.build import BaseImageRecord, ComponentRecord
from releasekit.records.lock import Lock, LockedGitComponent, LockedWheelComponent, canonical_json

Progress = Callable[[str], None]


def quiet(_: str) -> None:
    return None


class BuildOptions(BaseModel):
    manifest: Path
    lock: Path
    outdir: Path | None = None
    tag: str | None = None
    no_cache: bool = False
    wheelhouses: list[Path] = Field(default_factory=list)
    cache_dir: Path | None = None  # the build cache; git mirrors use the git layer's default
    git_cache_dir: Path | None = None
    allow_local_repos: bool = False
    keep_image_archive: bool = False
    template: Path | None = None
    plan_check: Path | None = None  # plan-check.json wherever `plan check -o` wrote it
    # Where sources are checked out and built. Fixed, so that paths compiled into binaries are too.
    build_root: Path | None = None


@dataclass(frozen=True)
class BuildRun:
    """One build's inputs, read and checked once before anything is built; every step takes this."""

    options: BuildOptions
    loaded: LoadedManifest
    lock: Lock
    lock_sha256: str
    engine: Engine
    base: BaseImageRecord  # resolve_base: the locked base, found in the engine
    cache: BuildCache
    outdir: Path  # wheels/ and logs/ are written under it
    template: Path
    allow_local: bool  # local repositories, as the option and the environment allow them
    progress: Progress = quiet


def check_lock_matches(loaded: LoadedManifest, lock: Lock) -> None:
    """Refuse a lock made from another manifest, or naming other components or kinds (before anything is built)."""
    if lock.manifest.sha256 != loaded.sha256:
        raise InputError(
            f"the lock was made from another manifest (lock names sha256 {lock.manifest.sha256[:12]}, "
            f"{loaded.path.name} is {loaded.sha256[:12]})",
            hint="run `releasekit plan lock` again",
        )
    if set(lock.components) != set(loaded.manifest.components):
        raise InputError(
            "the lock and the manifest name different components", hint="run `releasekit plan lock` again"
        )
    for name, locked in lock.components.items():
        if locked.kind != loaded.manifest.components[name].kind:
            raise InputError(
                f"{name}: the lock has a {locked.kind} component, the manifest a {loaded.manifest.components[name].kind} one"
            )


def default_build_root() -> Path:
    return Path(tempfile.gettempdir()) / "releasekit-build"


def default_template() -> Path:
    return dockerfile.TEMPLATES_DIR / dockerfile.DEFAULT_TEMPLATE


def resolve_base(engine: Engine, lock: Lock) -> BaseImageRecord:
    base = lock.toolchain.base_image
    image_id = engine.image_id(base.image_id or base.name)
    if image_id is None and base.image_id:
        image_id = engine.image_id(base.name)
    if image_id is None:
        raise EnvironmentProblem(
            f"base image {base.name} is not in the Docker Engine",
            hint="load or build it (releasekit demo makes its own), then rerun: built wheels are cached",
        )
    if base.image_id and image_id != base.image_id:
        raise EnvironmentProblem(
            f"base image {base.name} is {image_id[:19]}, the lock pins {base.image_id[:19]}",
            hint="restore the locked base image or lock again",
        )
    if base.digest and not base.image_id:
        repo_digests = [
            d.split("@", 1)[1] for d in engine.image_attrs(image_id).get("RepoDigests") or [] if "@" in d
        ]
        if base.digest != image_id and base.digest not in repo_digests:
            raise EnvironmentProblem(
                f"base image {base.name} in the Docker Engine is not the locked digest {base.digest[:19]}",
                hint="load the locked base image",
            )
    return BaseImageRecord(name=base.name, digest=base.digest, image_id=image_id)


def _build_git_component(
    run: BuildRun, name: str, locked: LockedGitComponent, declared: GitComponent
) -> ComponentRecord:
    record = ComponentRecord(
        name=name,
        kind="git",
        role=declared.role,
        repo=locked.repo,
        ref=f"refs/heads/{locked.canonical_branch}",
        commit=locked.commit,
        tree=locked.tree,
        distribution=declared.distribution,
        import_names=list(declared.import_names),
    )
    recipe = declared.build
    if recipe is None:
        return record
    record.version_policy = recipe.version_policy.policy
    record.version_policy_reason = recipe.version_policy.reason
    stamp.check_policy_input(recipe, name)
    lock = run.lock
    arches = list(recipe.cuda_arch_list or lock.toolchain.cuda_arch_list) if recipe.native else []
    builder = ensure_builder(
        run.engine,
        name,
        recipe.environment,
        run.loaded.directory,
        locked.builder,
        log=run.outdir / "logs" / f"{name}-builder.log",
    )
    record.builder_image = builder.image_id if builder else None
    record.builder_name = builder.name if builder else None
    # A venv recipe is built in a sandbox of the release base image: its Python builds the wheel.
    sandbox = builder or WheelBuilder(
        engine=run.engine,
        name=run.base.name,
        image_id=run.base.image_id,
        venv=True,
        host_toolchain=recipe.native,
    )
    # The locked manifest's grant (build checked it is the lock's): the build's sandbox gets a network.
    sandbox = replace(sandbox, network=declared.network_granted("build"))
    record.network = sandbox.network
    key = wheel_key(locked, recipe, lock.toolchain, arches, sandbox.image_id, network=sandbox.network)
    log_path = run.outdir / "logs" / f"{name}.log"
    record.log = f"logs/{name}.log"
    with run.cache.entry("wheels", key):  # a second build of the same key waits here, then hits
        wheel = run.cache.get_wheel(key, run.outdir / "wheels", log_path)
        if wheel is None:
            record.cache = "miss"
            wheel = _build_from_source(run, name, locked, declared, arches=arches, builder=sandbox)
            run.cache.put_wheel(key, wheel, log_path)
        else:
            record.cache = "hit"
    _record_wheel(record, name, declared, wheel, arches)
    return record


def _build_from_source(
    run: BuildRun,
    name: str,
    locked: LockedGitComponent,
    declared: GitComponent,
    *,
    arches: list[str],
    builder: WheelBuilder,
) -> BuiltWheel:
    """A cache miss: build from a fresh checkout of the locked tree, which is removed whatever happens."""
    recipe = declared.build
    assert recipe is not None  # only components with a recipe are built
    log_path = run.outdir / "logs" / f"{name}.log"
    opts = run.options
    mirror = Mirror(
        declared.repo, opts.git_cache_dir, allow_local=run.allow_local, base_dir=run.loaded.directory
    )
    if mirror.url != locked.repo:
        raise InputError(f"{name}: the manifest names {mirror.url}, the lock {locked.repo}")
    root = opts.build_root or default_build_root()
    with atomic.entry_lock(root / name):  # one build at a time per fixed source path
        src = root / name
        shutil.rmtree(src, ignore_errors=True)
        # fresh_checkout refuses unless HEAD and tree are exactly the locked ones and the tree is clean.
        fresh_checkout(mirror, locked.commit, src, expect_tree=locked.tree)
        try:
            # The version policy's stamp changes the build copy only, and is recorded.
            stamped = stamp.apply(recipe, src, locked.commit, name)
            wheel = build_wheel(
                src,
                run.outdir / "wheels",
                recipe=recipe,
                commit=locked.commit,
                source_date_epoch=locked.commit_time,
                arches=arches,
                log=Log(log_path),
                component=name,
                builder=builder,
                extra_env=stamped.env,
            )
            wheel.modifications = [m.model_dump(mode="json") for m in stamped.modifications]
            _sources_untouched(name, src, recipe.generated_files, recipe.subdirectory, stamped.modifications)
        finally:
            shutil.rmtree(src, ignore_errors=True)
    return wheel


def _record_wheel(
    record: ComponentRecord, name: str, declared: GitComponent, wheel: BuiltWheel, arches: list[str]
) -> None:
    """The wheel into the record, once it is the distribution the manifest declares (not just any wheel)."""
    if declared.distribution and wheel.distribution.lower().replace(
        "_", "-"
    ) != declared.distribution.lower().replace("_", "-"):
        raise BuildFailed(
            f"{name}: built distribution {wheel.distribution}, the manifest declares {declared.distribution}"
        )
    record.built = True
    record.version = wheel.version
    record.distribution = wheel.distribution
    record.wheel_filename = wheel.filename
    record.wheel_sha256 = wheel.sha256
    record.native_arches = arches
    record.environment = dict(wheel.environment)
    record.modifications = list(wheel.modifications)


def _sources_untouched(
    name: str,
    src: Path,
    generated: list[str],
    subdirectory: str | None,
    stamped: list[Modification] | None = None,
) -> None:
    """A build may write its declared generated files and ignored files, never a tracked source.

    A backend that edits tracked files ships sources that are not the locked commit's. A
    file the version policy stamped is allowed only with exactly the stamped content.
    """
    allowed = {g for g in generated} | {f"{subdirectory.rstrip('/')}/{g}" for g in generated if subdirectory}
    for mod in stamped or []:
        if mod.path and file_sha256(src / mod.path) == mod.after_sha256:
            allowed.add(mod.path)
    status = work_tree_status(src, "--untracked-files=no")
    changed = [line[3:] for line in status.splitlines() if line[3:] not in allowed]
    if changed:
        raise BuildFailed(
            f"{name}: the build changed the checked-out sources ({', '.join(changed[:3])}); "
            "the wheel would not be the locked commit"
        )


def render_template(template: Path, base: BaseImageRecord, labels: dict[str, str]) -> str:
    if not template.is_file():
        raise InputError(f"Dockerfile template {template} not found")
    rendered = dockerfile.render(
        template, {"base": {"name": base.name, "digest": base.digest or base.image_id}, "labels": labels}
    )
    problems = dockerfile.lint(rendered, template.name)
    if not problems.passed:
        raise BuildFailed(
            f"{template.name} refused: {problems.errors[0].render()}",
            details=[f.render() for f in problems.errors],
        )
    return rendered


def _layer_key(base_id: str, wheels: list[WheelInput], sde: int) -> str:
    material = {
        "format": LAYER_FORMAT,
        "base": base_id,
        "sde": sde,
        "wheels": sorted(
            (w.filename, w.sha256, w.distribution, w.version, sorted(w.import_names)) for w in wheels
        ),
    }
    return hashlib.sha256(canonical_json(material)).hexdigest()


class ReleaseSettings(BaseModel):
    """What the release image is told besides its files: labels, the rendered template, its settings."""

    model_config = {"arbitrary_types_allowed": True}

    source_date_epoch: int
    labels: dict[str, str]
    rendered: str
    image: dockerfile.ImageSettings


def _pinned_wheel(
    run: BuildRun, name: str, locked: LockedWheelComponent, declared: WheelComponent
) -> ComponentRecord:
    """A pinned wheel, fetched into ``outdir/wheels`` and accepted by its locked sha256 alone."""
    path = fetch_pinned_wheel(locked, run.options.wheelhouses, declared.index_url, run.outdir / "wheels")
    run.progress(f"{name}: {path.name} (pinned wheel, sha256 verified)")
    return ComponentRecord(
        name=name,
        kind="wheel",
        role="runtime",
        repo=locked.source.repo if locked.source else None,
        ref=locked.source.ref if locked.source else None,
        commit=locked.source.commit if locked.source else None,
        version=locked.version,
        distribution=locked.distribution,
        import_names=list(declared.import_names),
        wheel_filename=locked.filename,
        wheel_sha256=locked.sha256,
    )


def build_components(run: BuildRun) -> tuple[list[ComponentRecord], list[WheelInput]]:
    """Every locked component built (or its pinned wheel fetched) into ``outdir/wheels``, in lock order."""
    manifest = run.loaded.manifest
    components: list[ComponentRecord] = []
    wheels: list[WheelInput] = []
    for name, locked in run.lock.components.items():
        declared = manifest.components.get(name)
        if declared is None:
            raise InputError(f"the manifest has no component {name}")
        if isinstance(locked, LockedGitComponent):
            if not isinstance(declared, GitComponent):
                raise InputError(f"{name}: the lock has a git component, the manifest another kind")
            run.progress(f"{name}: {locked.commit[:12]}")
            record = _build_git_component(run, name, locked, declared)
            run.progress(f"{name}: {record.wheel_filename or 'recorded (no build recipe)'} [{record.cache}]")
        else:
            if not isinstance(declared, WheelComponent):
                raise InputError(f"{name}: the lock has a pinned wheel, the manifest another kind")
            record = _pinned_wheel(run, name, locked, declared)
        components.append(record)
        if record.wheel_filename and record.role != "build-repo":
            wheels.append(
                WheelInput(
                    path=str(run.outdir / "wheels" / record.wheel_filename),
                    filename=record.wheel_filename,
                    sha256=record.wheel_sha256 or "",
                    distribution=record.distribution or "",
                    version=record.version or "",
                    import_names=record.import_names,
                )
            )
    return components, wheels


def release_settings(run: BuildRun, components: list[ComponentRecord]) -> ReleaseSettings:
    """Labels and image settings of the release, all derived from the lock (the same on every build)."""
    lock = run.lock
    git_times = [c.commit_time for c in lock.git_components().values()]
    # The newest source commit: the image is no older than what it contains, and it is the same every build.
    sde = max(git_times) if git_times else 0
    created = datetime.fromtimestamp(sde, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = image_labels(
        components=components,
        base=run.base,
        created=created,
        lock_sha256=run.lock_sha256,
        manifest_sha256=run.loaded.sha256,
        release_name=lock.name,
        unverified_sources=frozenset(
            n for n, w in lock.wheel_components().items() if w.source is not None and not w.source.verified
        ),
    )
    rendered = render_template(run.template, run.base, labels)
    return ReleaseSettings(
        source_date_epoch=sde, labels=labels, rendered=rendered, image=dockerfile.image_settings(rendered)
    )


def release_layer(
    run: BuildRun, wheels: list[WheelInput], sde: int
) -> tuple[Path, SmokeReport, Literal["hit", "miss"]]:
    """The wheels layer (from the cache, keyed by base, wheels and time, or installed now): path, smoke report, hit/miss."""
    base, cache = run.base, run.cache
    layer_key = _layer_key(base.image_id, wheels, sde)
    names = ["layer.tar", "smoke.json"]
    with cache.entry("layers", layer_key):  # one install per key, however many builds want it at once
        found = cache.get_files("layers", layer_key, names)
        if found is not None:
            run.progress("image: wheels layer from cache (installed and smoke-tested before)")
            return found["layer.tar"], SmokeReport.model_validate_json(found["smoke.json"].read_text()), "hit"
        run.progress(f"image: installing {len(wheels)} wheel(s) into a clean {base.name} container")
        with tempfile.TemporaryDirectory(prefix="releasekit-layer-") as tmp:
            fresh = Path(tmp) / "layer.tar"
            smoke = install_layer(
                run.engine, base.image_id, wheels, sde, fresh, log=run.outdir / "logs" / "image.log"
            )
            report = Path(tmp) / "smoke.json"
            report.write_text(smoke.model_dump_json())
            stored = cache.put_files("layers", layer_key, {"layer.tar": fresh, "smoke.json": report})
    return stored["layer.tar"], smoke, "miss"
