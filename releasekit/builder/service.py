"""``releasekit build``: lock -> fresh checkouts -> wheels -> smoke test -> image -> labels, provenance, notes.

The order matters for the promise "nothing half-built is tagged": every wheel is built
and checked, the wheels are installed and smoke-tested in a clean container, the image
is assembled and loaded untagged, the record, provenance and notes are written, and
only then is the tag applied.

This is the orchestrator: it gathers one frozen ``BuildRun`` and runs the steps of the
builder's library (``builder/release_image.py``), which the verifiers run too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from releasekit import __version__
from releasekit.atomic import abandon_run, begin_run, commit_run, write_atomic
from releasekit.builder.archive import archive_byproducts, make_archive
from releasekit.builder.cache import BuildCache
from releasekit.builder.checks.host_env import HostEnvironmentContext, UndeclaredHostEnvironmentCheck
from releasekit.builder.image import AssembledImage, SmokeReport, WheelInput, assemble
from releasekit.builder.labels import UNVERIFIED, source_unverified
from releasekit.builder.release_image import BuildOptions as BuildOptions
from releasekit.builder.release_image import (
    BuildRun,
    Progress,
    ReleaseSettings,
    build_components,
    check_lock_matches,
    default_template,
    quiet,
    release_layer,
    release_settings,
    render_template,
    resolve_base,
)
from releasekit.builder.release_notes import notes_plan, render_release_notes, with_manifest
from releasekit.builder.statement import git_dependency
from releasekit.clock import Clock
from releasekit.docker_engine import Engine
from releasekit.errors import BuildFailed, EnvironmentProblem, InputError
from releasekit.git import local_repos_allowed
from releasekit.manifest import load_manifest
from releasekit.manifest.models import BuildRecipe, GitComponent
from releasekit.records.archive import ARCHIVE_FILE, ArchiveIndex
from releasekit.records.base import load_record
from releasekit.records.build import (
    BUILD_FILE,
    RELEASE_NOTES_FILE,
    BuildRecord,
    CacheReport,
    ComponentRecord,
    ImageRecord,
)
from releasekit.records.lock import Lock, lock_file_sha256, read_lock
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
from releasekit.records.release_dir import replaced_by
from releasekit.records.reproduce_receipt import runner_identity
from releasekit.signing.statements import sign_statement_file

BUILDER_ID = "https://releasekit.dev/builder/local"


def _work_dir(outdir: Path) -> Path:
    """This build's work directory inside the release directory: everything the build writes goes
    there, and into the release directory only once it is complete (``_commit``)."""
    work = begin_run(outdir, "build")
    for sub in ("wheels", "logs"):
        (work / sub).mkdir()
    return work


def _commit(run: BuildRun, outdir: Path) -> None:
    """The earlier build's files and every later stage's record of the chain go, this build's come in,
    ``build.json`` last (its presence means done): see docs/build.md, "One run per release directory"."""
    commit_run(run.outdir, outdir, remove=replaced_by("build"), last=BUILD_FILE)


def check_host_environment(components: Mapping[str, GitComponent], host: Mapping[str, str]) -> None:
    """Exit 2 before anything is built when a host variable would change the output undeclared."""
    recipes: dict[str, BuildRecipe] = {n: c.build for n, c in components.items() if c.build is not None}
    found = UndeclaredHostEnvironmentCheck().run(HostEnvironmentContext(host=host, recipes=recipes))
    if not found.passed:
        raise EnvironmentProblem(found.errors[0].message, hint="see docs/build.md, build-time environment")


def run_build(
    opts: BuildOptions, engine: Engine | Callable[[], Engine], progress: Progress = quiet, *, clock: Clock
) -> BuildRecord:
    """The whole build; ``engine`` and ``clock`` come from the caller (the commands layer), so this creates none.

    ``engine`` may be a factory (the commands layer passes ``Engine``): it is called only once the
    manifest, lock and key have been read, so a bad input is named before a missing Docker Engine.
    ``clock`` stamps the provenance's ``startedOn`` (now) and ``finishedOn`` (as it is written).
    """
    started = clock.now()
    run, outdir = _gather(opts, engine, progress)
    try:
        record, built = _build_into(run, started, clock)
    except BuildFailed:
        abandon_run(run.outdir, keep=("logs",))  # the logs its error names, until the next build
        raise
    except BaseException:
        abandon_run(run.outdir)  # a failed or interrupted build leaves the release directory as it was
        raise
    _commit(run, outdir)
    if opts.tag:
        run.engine.tag(built.image.image_id, opts.tag)
        progress(f"image: tagged {opts.tag}")
    return record


def _build_into(run: BuildRun, started: datetime, clock: Clock) -> tuple[BuildRecord, _BuiltImage]:
    """Every step, into the build's work directory (``run.outdir``)."""
    opts = run.options
    components, wheels = build_components(run)
    if not wheels:
        raise InputError(
            f"{run.loaded.path.name}: no component produces a wheel to install; nothing to build"
        )
    # The release source archive: bundles of the locked commits, locked wheels, manifest, lock; proven complete now.
    archive = make_archive(
        outdir=run.outdir,
        loaded=run.loaded,
        lock=run.lock,
        lock_path=opts.lock,
        lock_sha256=run.lock_sha256,
        git_cache_dir=opts.git_cache_dir,
        allow_local=run.allow_local,
        progress=run.progress,
    )

    settings = release_settings(run, components)
    write_atomic(run.outdir / "Dockerfile", settings.rendered)

    built = _release_image(run, wheels, components, settings)

    record = _build_record(run, built, settings, components, archive)
    _write_release_files(run, record, archive, started, clock=clock)
    return record, built


def _gather(
    opts: BuildOptions, engine: Engine | Callable[[], Engine], progress: Progress
) -> tuple[BuildRun, Path]:
    """Every input read and checked, in the order that fails cheapest first; nothing built or written yet
    except the build's empty work directory (the run's ``outdir``), and the release directory."""
    loaded = load_manifest(opts.manifest)
    lock = read_lock(opts.lock)
    lock_sha = lock_file_sha256(opts.lock)
    check_lock_matches(loaded, lock)
    allow_local = local_repos_allowed(opts.allow_local_repos)
    check_host_environment(loaded.manifest.git_components(), os.environ)
    if not isinstance(engine, Engine):
        engine = engine()
    base = resolve_base(engine, lock)
    template = opts.template or default_template()
    # Lint first: a template that would copy sources in fails before anything is built or written.
    render_template(template, base, {})
    outdir = opts.outdir or Path("release") / lock.name
    # The plan check RELEASE.md reads may be an earlier stage's file in the release directory.
    plan_check = plan_check_path(opts, outdir)
    opts = opts.model_copy(update={"plan_check": plan_check}) if plan_check is not None else opts
    run = BuildRun(
        options=opts,
        loaded=loaded,
        lock=lock,
        lock_sha256=lock_sha,
        engine=engine,
        base=base,
        cache=BuildCache(opts.cache_dir, enabled=not opts.no_cache),
        outdir=_work_dir(outdir),
        template=template,
        allow_local=allow_local,
        progress=progress,
    )
    return run, outdir


@dataclass(frozen=True)
class _BuiltImage:
    image: AssembledImage
    smoke: SmokeReport
    cache: CacheReport


def _release_image(
    run: BuildRun, wheels: list[WheelInput], components: list[ComponentRecord], settings: ReleaseSettings
) -> _BuiltImage:
    """The image: the wheels' layer (cached by its inputs) on the base, assembled without a Dockerfile build."""
    sde = settings.source_date_epoch
    cache_report = _cache_report(components)
    layer, smoke, cache_report.layer = release_layer(run, wheels, sde)
    image = assemble(
        run.engine,
        base_id=run.base.image_id,
        layer=layer,
        settings=settings.image,
        source_date_epoch=sde,
        archive_out=run.outdir / "image.tar" if run.options.keep_image_archive else None,
        smoke=smoke,
        base_cache=run.cache.root / "bases",
    )
    run.progress(f"image: {image.image_id}")
    return _BuiltImage(image=image, smoke=smoke, cache=cache_report)


def _cache_report(components: list[ComponentRecord]) -> CacheReport:
    """Which components came from the build cache: a hit is only as good as its key, so the record says."""
    return CacheReport(
        hits=[c.name for c in components if c.cache == "hit"],
        misses=[c.name for c in components if c.cache == "miss"],
    )


def _build_record(
    run: BuildRun,
    built: _BuiltImage,
    settings: ReleaseSettings,
    components: list[ComponentRecord],
    archive: ArchiveIndex,
) -> BuildRecord:
    """The build record: what later stages read instead of the engine, so every name they need is here."""
    sde = settings.source_date_epoch
    opts, image = run.options, built.image
    return BuildRecord(
        name=run.lock.name,
        lock_sha256=run.lock_sha256,
        manifest_sha256=run.loaded.sha256,
        image_id=image.image_id,
        image_tag=opts.tag,
        toolchain=run.lock.toolchain.model_dump(mode="json", exclude={"base_image"}),
        base_image=run.base,
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
        cache=built.cache,
        smoke=built.smoke.model_dump(mode="json"),
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
    run: BuildRun, record: BuildRecord, archive: ArchiveIndex, started: datetime, *, clock: Clock
) -> None:
    """Provenance (unsigned: `releasekit sign` signs it later), release notes, then the build record last:
    its presence means done."""
    outdir = run.outdir
    statement = provenance_statement(
        record, run.lock, run.options, run.lock_sha256, started, finished=clock.now()
    )
    statement.predicate.runDetails.byproducts.extend(archive_byproducts(archive, outdir))
    write_statement(statement, outdir / PROVENANCE_FILE)
    # An envelope an earlier build left here signs other bytes: removed (a planted link too, never followed).
    sign_statement_file(None, outdir / PROVENANCE_FILE)
    found = plan_check_path(run.options, outdir)
    plan_check = load_record(PlanCheckResult, found) if found is not None else None
    notes = notes_plan(run.lock, run.loaded.manifest.exclusions, plan_check, run.lock_sha256)
    notes = with_manifest(notes, run.loaded.manifest)
    write_atomic(outdir / RELEASE_NOTES_FILE, render_release_notes(record, notes))
    record.write(outdir / BUILD_FILE)


def plan_check_path(options: BuildOptions, outdir: Path) -> Path | None:
    """The plan check's record RELEASE.md reads: ``--plan-check``, else the one plan check left in the
    release directory (an earlier stage's file), else the one beside the lock; None when there is none."""
    if options.plan_check is not None:
        if not options.plan_check.is_file():
            raise InputError(f"--plan-check {options.plan_check}: no such file")
        return options.plan_check
    for candidate in (outdir / PLAN_CHECK_FILE, options.lock.parent / PLAN_CHECK_FILE):
        if candidate.is_file():
            return candidate
    return None


def provenance_statement(
    record: BuildRecord,
    lock: Lock,
    opts: BuildOptions,
    lock_sha: str,
    started: datetime,
    *,
    finished: datetime,
) -> Statement:
    """The build's SLSA provenance; ``started`` and ``finished`` (UTC) are its ``startedOn`` and ``finishedOn``."""
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
                    # The machine that ran this build ($RUNNER_NAME, else the hostname): a reproduction
                    # that promote accepts was made on another one (docs/reproduce.md).
                    "runner": runner_identity(),
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
                    # The builds whose sandbox had a network (the manifest's sandbox.network grant).
                    "networkGranted": sorted(c.name for c in record.components if c.network),
                },
                resolvedDependencies=deps,
            ),
            runDetails=RunDetails(
                builder=Builder(id=BUILDER_ID, version={"releasekit": __version__}),
                metadata=BuildMetadata(
                    invocationId=f"{record.name}-{lock_sha[:12]}-{int(started.timestamp())}",
                    startedOn=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    finishedOn=finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
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
                # WHEEL_SOURCE_UNVERIFIED: the source and commit are as given, not checked.
                "sourceVerification": UNVERIFIED if source_unverified(record.labels, c.name) else None,
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
