"""``releasekit build``: lock -> fresh checkouts -> wheels -> smoke test -> image -> labels, provenance, notes.

The order matters for the promise "nothing half-built is tagged": every wheel is built
and checked, the wheels are installed and smoke-tested in a clean container, the image
is assembled and loaded untagged, the record, provenance and notes are written, and
only then is the tag applied.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from releasekit import __version__, atomic
from releasekit.atomic import write_atomic
from releasekit.builder import dockerfile, stamp
from releasekit.builder.archive import archive_byproducts, make_archive
from releasekit.builder.builders import ensure_builder
from releasekit.builder.cache import BuildCache, wheel_key
from releasekit.builder.checks.host_env import HostEnvironmentContext, UndeclaredHostEnvironmentCheck
from releasekit.builder.image import (
    LAYER_FORMAT,
    AssembledImage,
    SmokeReport,
    WheelInput,
    assemble,
    install_layer,
)
from releasekit.builder.labels import image_labels
from releasekit.builder.release_notes import notes_plan, render_release_notes
from releasekit.builder.stamp import Modification
from releasekit.builder.statement import git_dependency
from releasekit.builder.wheel import Builder as WheelBuilder
from releasekit.builder.wheel import BuiltWheel, Log, build_wheel
from releasekit.builder.wheelhouse import fetch_pinned_wheel
from releasekit.digests import file_sha256
from releasekit.docker_engine import Engine
from releasekit.errors import BuildFailed, EnvironmentProblem, InputError
from releasekit.git import Git, Mirror, fresh_checkout, local_repos_allowed
from releasekit.manifest import LoadedManifest, load_manifest
from releasekit.manifest.models import BuildRecipe, GitComponent, WheelComponent
from releasekit.records.archive import ARCHIVE_FILE, ArchiveIndex
from releasekit.records.base import load_record
from releasekit.records.build import (
    BUILD_FILE,
    RELEASE_NOTES_FILE,
    BaseImageRecord,
    BuildRecord,
    CacheReport,
    ComponentRecord,
    ImageRecord,
)
from releasekit.records.dsse import PROVENANCE_ENVELOPE_FILE
from releasekit.records.lock import Lock, LockedGitComponent, canonical_json, lock_file_sha256, read_lock
from releasekit.records.plan_check import PLAN_CHECK_FILE, PlanCheckResult
from releasekit.records.provenance import (
    PROVENANCE_FILE,
    BuildDefinition,
    Builder,
    BuildMetadata,
    Predicate,
    ResourceDescriptor,
    RunDetails,
    Statement,
    sha256_digest,
    write_statement,
)
from releasekit.signing import Signer, load_signer
from releasekit.signing.statements import sign_statement_file

BUILDER_ID = "https://releasekit.dev/builder/local"


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
    # Where sources are checked out and built. Fixed, so that paths compiled into binaries are too.
    build_root: Path | None = None
    # A PEM private key; without it, $RELEASEKIT_SIGNING_KEY_FILE / $RELEASEKIT_SIGNING_KEY, else unsigned.
    signing_key: Path | None = None


Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def default_build_root() -> Path:
    return Path(tempfile.gettempdir()) / "releasekit-build"


def _consistent(loaded: LoadedManifest, lock: Lock) -> None:
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


def _prepare_outdir(outdir: Path) -> None:
    """Remove what a previous build here wrote, so that nothing stale is mistaken for this build."""
    outdir.mkdir(parents=True, exist_ok=True)
    for name in (
        BUILD_FILE,
        PROVENANCE_FILE,
        PROVENANCE_ENVELOPE_FILE,
        RELEASE_NOTES_FILE,
        "Dockerfile",
        "image.tar",
        ARCHIVE_FILE,
    ):
        (outdir / name).unlink(missing_ok=True)
    for sub in ("wheels", "logs"):
        shutil.rmtree(outdir / sub, ignore_errors=True)
        (outdir / sub).mkdir()


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
    name: str,
    locked: LockedGitComponent,
    declared: GitComponent,
    loaded: LoadedManifest,
    lock: Lock,
    opts: BuildOptions,
    cache: BuildCache,
    outdir: Path,
    allow_local: bool,
    engine: Engine,
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
    arches = list(recipe.cuda_arch_list or lock.toolchain.cuda_arch_list) if recipe.native else []
    builder = ensure_builder(
        engine,
        name,
        recipe.environment,
        loaded.directory,
        locked.builder,
        outdir / "logs" / f"{name}-builder.log",
    )
    record.builder_image = builder.image_id if builder else None
    record.builder_name = builder.name if builder else None
    key = wheel_key(locked, recipe, lock.toolchain, arches, builder.image_id if builder else None)
    log_path = outdir / "logs" / f"{name}.log"
    record.log = f"logs/{name}.log"
    with cache.entry("wheels", key):  # a second build of the same key waits here, then hits
        wheel = cache.get_wheel(key, outdir / "wheels", log_path)
        if wheel is None:
            record.cache = "miss"
            wheel = _build_from_source(
                name, locked, declared, recipe, loaded, opts, outdir, allow_local, arches, builder
            )
            cache.put_wheel(key, wheel, log_path)
        else:
            record.cache = "hit"
    _record_wheel(record, name, declared, wheel, arches)
    return record


def _build_from_source(
    name: str,
    locked: LockedGitComponent,
    declared: GitComponent,
    recipe: BuildRecipe,
    loaded: LoadedManifest,
    opts: BuildOptions,
    outdir: Path,
    allow_local: bool,
    arches: list[str],
    builder: WheelBuilder | None,
) -> BuiltWheel:
    """A cache miss: build from a fresh checkout of the locked tree, which is removed whatever happens."""
    log_path = outdir / "logs" / f"{name}.log"
    mirror = Mirror(declared.repo, opts.git_cache_dir, allow_local=allow_local, base_dir=loaded.directory)
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
                outdir / "wheels",
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
    status = Git(src).run("status", "--porcelain", "--untracked-files=no")
    changed = [line[3:] for line in status.splitlines() if line[3:] not in allowed]
    if changed:
        raise BuildFailed(
            f"{name}: the build changed the checked-out sources ({', '.join(changed[:3])}); "
            "the wheel would not be the locked commit"
        )


def check_host_environment(components: Mapping[str, GitComponent], host: Mapping[str, str]) -> None:
    """Exit 2 before anything is built when a host variable would change the output undeclared."""
    recipes: dict[str, BuildRecipe] = {n: c.build for n, c in components.items() if c.build is not None}
    found = UndeclaredHostEnvironmentCheck().run(HostEnvironmentContext(host=host, recipes=recipes))
    if not found.passed:
        raise EnvironmentProblem(found.errors[0].message, hint="see docs/build.md, build-time environment")


def _render_template(template: Path, base: BaseImageRecord, labels: dict[str, str]) -> str:
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


def build_components(
    loaded: LoadedManifest,
    lock: Lock,
    opts: BuildOptions,
    cache: BuildCache,
    outdir: Path,
    allow_local: bool,
    engine: Engine,
    progress: Progress = _quiet,
) -> tuple[list[ComponentRecord], list[WheelInput]]:
    """Every locked component built (or its pinned wheel fetched) into ``outdir/wheels``, in lock order."""
    manifest = loaded.manifest
    components: list[ComponentRecord] = []
    wheels: list[WheelInput] = []
    for name, locked in lock.components.items():
        declared = manifest.components.get(name)
        if declared is None:
            raise InputError(f"the manifest has no component {name}")
        if isinstance(locked, LockedGitComponent):
            if not isinstance(declared, GitComponent):
                raise InputError(f"{name}: the lock has a git component, the manifest another kind")
            progress(f"{name}: {locked.commit[:12]}")
            record = _build_git_component(
                name, locked, declared, loaded, lock, opts, cache, outdir, allow_local, engine
            )
            progress(f"{name}: {record.wheel_filename or 'recorded (no build recipe)'} [{record.cache}]")
        else:
            if not isinstance(declared, WheelComponent):
                raise InputError(f"{name}: the lock has a pinned wheel, the manifest another kind")
            path = fetch_pinned_wheel(locked, opts.wheelhouses, declared.index_url, outdir / "wheels")
            record = ComponentRecord(
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
            progress(f"{name}: {path.name} (pinned wheel, sha256 verified)")
        components.append(record)
        if record.wheel_filename and record.role != "build-repo":
            wheels.append(
                WheelInput(
                    path=str(outdir / "wheels" / record.wheel_filename),
                    filename=record.wheel_filename,
                    sha256=record.wheel_sha256 or "",
                    distribution=record.distribution or "",
                    version=record.version or "",
                    import_names=record.import_names,
                )
            )
    return components, wheels


def release_settings(
    loaded: LoadedManifest,
    lock: Lock,
    lock_sha: str,
    components: list[ComponentRecord],
    base: BaseImageRecord,
    template: Path,
) -> ReleaseSettings:
    """Labels and image settings of the release, all derived from the lock (the same on every build)."""
    git_times = [c.commit_time for c in lock.git_components().values()]
    # The newest source commit: the image is no older than what it contains, and it is the same every build.
    sde = max(git_times) if git_times else 0
    created = datetime.fromtimestamp(sde, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = image_labels(
        components=components,
        base=base,
        created=created,
        lock_sha256=lock_sha,
        manifest_sha256=loaded.sha256,
        release_name=lock.name,
    )
    rendered = _render_template(template, base, labels)
    return ReleaseSettings(
        source_date_epoch=sde, labels=labels, rendered=rendered, image=dockerfile.image_settings(rendered)
    )


def release_layer(
    engine: Engine,
    cache: BuildCache,
    base: BaseImageRecord,
    wheels: list[WheelInput],
    sde: int,
    outdir: Path,
    progress: Progress = _quiet,
) -> tuple[Path, SmokeReport, Literal["hit", "miss"]]:
    """The wheels layer (from the cache, keyed by base, wheels and time, or installed now): path, smoke report, hit/miss."""
    layer_key = _layer_key(base.image_id, wheels, sde)
    names = ["layer.tar", "smoke.json"]
    with cache.entry("layers", layer_key):  # one install per key, however many builds want it at once
        found = cache.get_files("layers", layer_key, names)
        if found is not None:
            progress("image: wheels layer from cache (installed and smoke-tested before)")
            return found["layer.tar"], SmokeReport.model_validate_json(found["smoke.json"].read_text()), "hit"
        progress(f"image: installing {len(wheels)} wheel(s) into a clean {base.name} container")
        with tempfile.TemporaryDirectory(prefix="releasekit-layer-") as tmp:
            fresh = Path(tmp) / "layer.tar"
            smoke = install_layer(engine, base.image_id, wheels, sde, fresh, outdir / "logs" / "image.log")
            report = Path(tmp) / "smoke.json"
            report.write_text(smoke.model_dump_json())
            stored = cache.put_files("layers", layer_key, {"layer.tar": fresh, "smoke.json": report})
    return stored["layer.tar"], smoke, "miss"


def run_build(opts: BuildOptions, progress: Progress = _quiet) -> BuildRecord:
    started = datetime.now(UTC)
    loaded = load_manifest(opts.manifest)
    lock = read_lock(opts.lock)
    lock_sha = lock_file_sha256(opts.lock)
    _consistent(loaded, lock)
    signer = load_signer(opts.signing_key)  # a bad key fails now, before anything is built
    allow_local = local_repos_allowed(opts.allow_local_repos)
    check_host_environment(loaded.manifest.git_components(), os.environ)
    engine = Engine()  # no engine: exit 2 now, before any wheel is built
    base = resolve_base(engine, lock)
    template = opts.template or dockerfile.TEMPLATES_DIR / dockerfile.DEFAULT_TEMPLATE
    # Lint first: a template that would copy sources in fails before anything is built or written.
    _render_template(template, base, {})
    outdir = opts.outdir or Path("release") / lock.name
    _prepare_outdir(outdir)
    cache = BuildCache(opts.cache_dir, enabled=not opts.no_cache)

    components, wheels = build_components(loaded, lock, opts, cache, outdir, allow_local, engine, progress)
    if not wheels:
        raise InputError(f"{loaded.path.name}: no component produces a wheel to install; nothing to build")
    # The release source archive: bundles of the locked commits, locked wheels, manifest, lock; proven complete now.
    archive = make_archive(
        outdir=outdir,
        loaded=loaded,
        lock=lock,
        lock_path=opts.lock,
        lock_sha256=lock_sha,
        git_cache_dir=opts.git_cache_dir,
        allow_local=allow_local,
        progress=progress,
    )

    settings = release_settings(loaded, lock, lock_sha, components, base, template)
    write_atomic(outdir / "Dockerfile", settings.rendered)

    image, smoke, cache_report = _release_image(
        engine, cache, base, wheels, components, settings, opts, outdir, progress
    )

    record = _build_record(
        loaded, lock, lock_sha, opts, image, base, settings, components, cache_report, smoke, archive
    )
    _write_release_files(record, archive, signer, outdir, loaded, lock, opts, lock_sha, started)
    if opts.tag:
        engine.tag(image.image_id, opts.tag)
        progress(f"image: tagged {opts.tag}")
    return record


def _release_image(
    engine: Engine,
    cache: BuildCache,
    base: BaseImageRecord,
    wheels: list[WheelInput],
    components: list[ComponentRecord],
    settings: ReleaseSettings,
    opts: BuildOptions,
    outdir: Path,
    progress: Progress,
) -> tuple[AssembledImage, SmokeReport, CacheReport]:
    """The image: the wheels' layer (cached by its inputs) on the base, assembled without a Dockerfile build."""
    sde = settings.source_date_epoch
    cache_report = _cache_report(components)
    layer, smoke, cache_report.layer = release_layer(engine, cache, base, wheels, sde, outdir, progress)
    image = assemble(
        engine,
        base_id=base.image_id,
        layer=layer,
        settings=settings.image,
        source_date_epoch=sde,
        archive_out=outdir / "image.tar" if opts.keep_image_archive else None,
        smoke=smoke,
        base_cache=cache.root / "bases",
    )
    progress(f"image: {image.image_id}")
    return image, smoke, cache_report


def _cache_report(components: list[ComponentRecord]) -> CacheReport:
    """Which components came from the build cache: a hit is only as good as its key, so the record says."""
    return CacheReport(
        hits=[c.name for c in components if c.cache == "hit"],
        misses=[c.name for c in components if c.cache == "miss"],
    )


def _build_record(
    loaded: LoadedManifest,
    lock: Lock,
    lock_sha: str,
    opts: BuildOptions,
    image: AssembledImage,
    base: BaseImageRecord,
    settings: ReleaseSettings,
    components: list[ComponentRecord],
    cache_report: CacheReport,
    smoke: SmokeReport,
    archive: ArchiveIndex,
) -> BuildRecord:
    """The build record: what later stages read instead of the engine, so every name they need is here."""
    sde = settings.source_date_epoch
    return BuildRecord(
        name=lock.name,
        lock_sha256=lock_sha,
        manifest_sha256=loaded.sha256,
        image_id=image.image_id,
        image_tag=opts.tag,
        toolchain=lock.toolchain.model_dump(mode="json", exclude={"base_image"}),
        base_image=base,
        image=ImageRecord(
            created=image.created,
            source_date_epoch=sde,
            wheels_layer_digest=image.layer_digest,
            wheels_layer_size=image.layer_size,
            base_layers_size=image.base_size,
            archive="image.tar" if opts.keep_image_archive else None,
        ),
        components=components,
        labels=settings.labels,
        cache=cache_report,
        smoke=smoke.model_dump(mode="json"),
        outputs={
            "build_record": BUILD_FILE,
            "provenance": PROVENANCE_FILE,
            "release_notes": RELEASE_NOTES_FILE,
            "dockerfile": "Dockerfile",
            "wheels": "wheels/",
            "logs": "logs/",
            "archive": ARCHIVE_FILE,
        },
        archive=archive,
    )


def _write_release_files(
    record: BuildRecord,
    archive: ArchiveIndex,
    signer: Signer | None,
    outdir: Path,
    loaded: LoadedManifest,
    lock: Lock,
    opts: BuildOptions,
    lock_sha: str,
    started: datetime,
) -> None:
    """Provenance (signed when a key is given), release notes, then the build record last: its presence means done."""
    statement = provenance_statement(record, lock, opts, lock_sha, started)
    statement.predicate.runDetails.byproducts.extend(archive_byproducts(archive, outdir))
    write_statement(statement, outdir / PROVENANCE_FILE)
    sign_statement_file(signer, outdir / PROVENANCE_FILE)  # -> provenance.intoto.dsse.json
    # plan check runs before build and may have left its record here (an earlier stage's file).
    plan_check = (
        load_record(PlanCheckResult, outdir / PLAN_CHECK_FILE)
        if (outdir / PLAN_CHECK_FILE).is_file()
        else None
    )
    notes = notes_plan(lock, loaded.manifest.exclusions, plan_check, lock_sha)
    write_atomic(outdir / RELEASE_NOTES_FILE, render_release_notes(record, notes))
    record.write(outdir / BUILD_FILE)


def provenance_statement(
    record: BuildRecord, lock: Lock, opts: BuildOptions, lock_sha: str, started: datetime
) -> Statement:
    subjects = [ResourceDescriptor(name=opts.tag or record.name, digest=sha256_digest(record.image_id))]
    subjects += [
        ResourceDescriptor(name=c.wheel_filename, digest=sha256_digest(c.wheel_sha256))
        for c in record.components
        if c.wheel_filename and c.wheel_sha256 and c.kind == "git"
    ]
    deps = _resolved_dependencies(record, opts, lock_sha)
    return Statement(
        subject=subjects,
        predicate=Predicate(
            buildDefinition=BuildDefinition(
                externalParameters={
                    "manifest": {"path": opts.manifest.name, "sha256": record.manifest_sha256},
                    "lock": {"path": opts.lock.name, "sha256": lock_sha},
                    "tag": opts.tag,
                },
                internalParameters={
                    "sourceDateEpoch": record.image.source_date_epoch,
                    "toolchain": record.toolchain,
                    "cache": record.cache.model_dump(mode="json"),
                    # Per built component: the builder's environment (secrets redacted), the version
                    # policy, and the declared build-time modifications verify-provenance accepts.
                    "builderEnvironment": {c.name: c.environment for c in record.components if c.built},
                    "versionPolicies": {
                        c.name: {"policy": c.version_policy, "reason": c.version_policy_reason}
                        for c in record.components
                        if c.version_policy
                    },
                    "buildModifications": {
                        c.name: c.modifications for c in record.components if c.modifications
                    },
                },
                resolvedDependencies=deps,
            ),
            runDetails=RunDetails(
                builder=Builder(id=BUILDER_ID, version={"releasekit": __version__}),
                metadata=BuildMetadata(
                    invocationId=f"{record.name}-{lock_sha[:12]}-{int(started.timestamp())}",
                    startedOn=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    finishedOn=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                ),
            ),
        ),
    )


def _resolved_dependencies(
    record: BuildRecord, opts: BuildOptions, lock_sha: str
) -> list[ResourceDescriptor]:
    """Every input by digest (commits, wheels, builder images, base, lock): what verify-provenance re-derives."""
    deps: list[ResourceDescriptor] = []
    for c in record.components:
        if c.kind == "git" and c.repo and c.commit:
            deps.append(git_dependency(c.name, c.repo, c.ref, c.commit, c.tree))
        elif c.kind == "wheel" and c.wheel_sha256:
            annotations = {
                "source": f"git+{c.repo}@{c.ref}" if c.repo and c.ref else c.repo,
                "gitCommit": c.commit,
            }
            deps.append(
                ResourceDescriptor(
                    name=c.name,
                    uri=f"pkg:pypi/{c.distribution}@{c.version}",
                    digest=sha256_digest(c.wheel_sha256),
                    annotations={k: v for k, v in annotations.items() if v},
                )
            )
    for c in record.components:
        if c.builder_image:
            deps.append(
                ResourceDescriptor(
                    name=f"{c.name}-builder",
                    uri=f"docker-image://{c.builder_name or 'builder'}",
                    digest=sha256_digest(c.builder_image),
                )
            )
    base = record.base_image
    base_digest = {"sha256": (base.digest or base.image_id).removeprefix("sha256:")}
    deps.append(
        ResourceDescriptor(
            name="base-image",
            uri=f"docker-image://{base.name}",
            digest=base_digest,
            annotations={"imageId": base.image_id},
        )
    )
    deps.append(ResourceDescriptor(name="lock", uri=f"file:{opts.lock.name}", digest={"sha256": lock_sha}))
    return deps
