"""``plan lock``: resolve every moving name of a manifest to an exact SHA or sha256.

Canonical branch heads, PR heads (``refs/pull/N/head``), already-canonical commits
named by prefix, wheel pins (by hash of the wheel file) and the base image digest.
Anything that cannot be resolved makes the lock impossible: InputError, exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from releasekit.digests import file_sha256
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.findings import Findings
from releasekit.git.history import is_ancestor
from releasekit.git.mirror import Mirror
from releasekit.git.runner import GitFailed
from releasekit.manifest import TO_BE_LOCKED, LoadedManifest
from releasekit.manifest.models import GitComponent, Toolchain, WheelComponent, WheelSource
from releasekit.plan.checks import lock_checks
from releasekit.plan.checks.lock_context import LockContext
from releasekit.plan.forge_read import ForgeOpener, read_forge
from releasekit.plan.mirrors import open_mirror
from releasekit.plan.models_lock import ModelSources, lock_datasets, lock_models
from releasekit.plan.wheels import ImageInterpreter, image_interpreter, pinned_wheel
from releasekit.records.lock import (
    Lock,
    LockedBaseImage,
    LockedBuilder,
    LockedCanonicalCommit,
    LockedGitComponent,
    LockedManifest,
    LockedPR,
    LockedToolchain,
    LockedWheelComponent,
    LockedWheelSource,
)

if TYPE_CHECKING:
    from releasekit.docker_engine import Engine


def _lock_pr(
    mirror: Mirror,
    name: str,
    number: int,
    given_head: str | None,
    *,
    role: str,
    title: str | None,
    required: bool,
) -> LockedPR | None:
    ref = f"refs/pull/{number}/head"
    if given_head and given_head != TO_BE_LOCKED:
        if not mirror.has_commit(given_head):
            raise InputError(
                f"{name}#{number}: head {given_head} named in the manifest does not exist on {mirror.url}"
            )
        head = given_head
    else:
        found = mirror.pr_head(number)
        if found is None:
            if required:
                raise InputError(
                    f"{name}#{number}: {mirror.url} has no {ref}{mirror.why_absent(ref)}; cannot lock the merge plan"
                )
            return None
        head = found
    return LockedPR(number=number, ref=ref, head=head, tree=mirror.tree_of(head), title=title, role=role)  # type: ignore[arg-type]


def lock_git_component(name: str, comp: GitComponent, mirror: Mirror) -> LockedGitComponent:
    branch = comp.canonical_branch or mirror.default_branch()
    canonical_head = mirror.branch_head(branch)
    if comp.commit and comp.commit != TO_BE_LOCKED:
        if not mirror.has_commit(comp.commit):
            raise InputError(f"{name}: pinned commit {comp.commit} does not exist on {mirror.url}")
        commit = comp.commit
    else:
        commit = canonical_head
    prs: list[LockedPR] = []
    for planned in comp.merge_plan:
        locked = _lock_pr(
            mirror, name, planned.pr, planned.head, role="planned", title=planned.title, required=True
        )
        assert locked is not None
        prs.append(locked)
    superseded = {s for entry in comp.superseding() for s in entry.supersedes}
    for change in comp.already_canonical:
        if change.pr is not None:
            locked = _lock_pr(
                mirror, name, change.pr, None, role="already_canonical", title=change.title, required=False
            )
            if locked:
                prs.append(locked)
    for closed in comp.closed:
        locked = _lock_pr(mirror, name, closed.pr, None, role="closed", title=closed.title, required=False)
        if locked:
            prs.append(locked)
    for number in sorted(superseded - {c.pr for c in comp.closed}):
        # Superseded PRs are often deleted forges-side; record them when they still exist.
        locked = _lock_pr(mirror, name, number, None, role="superseded", title=None, required=False)
        if locked:
            prs.append(locked)
    canonical_commits = []
    for change in comp.already_canonical:
        if change.commit is not None:
            if not mirror.has_commit(change.commit):
                raise InputError(
                    f"{name}: already-canonical commit {change.commit} does not exist on {mirror.url}"
                )
            canonical_commits.append(
                LockedCanonicalCommit(given=change.commit, commit=mirror.resolve(change.commit))
            )
    return LockedGitComponent(
        name=name,
        repo=mirror.url,
        canonical_branch=branch,
        commit=commit,
        tree=mirror.tree_of(commit),
        commit_time=mirror.commit_time(commit),
        canonical_head=canonical_head,
        pull_requests=prs,
        canonical_commits=canonical_commits,
    )


def lock_wheel_source(
    name: str,
    src: WheelSource,
    *,
    cache_dir: Path | None = None,
    allow_local: bool = False,
    fetch: bool = True,
) -> LockedWheelSource:
    """Where a pinned wheel was built from, checked against its repository when that is reachable.

    Reached: an abbreviated commit becomes the full SHA, ``to-be-locked`` becomes the ref's
    head, and a commit that is not on the named ref makes the lock impossible. Not
    reachable (no network): recorded as given, ``verified: false``.
    """
    given = src.commit if src.commit and src.commit != TO_BE_LOCKED else None
    mirror = Mirror(src.repo, cache_dir, allow_local=allow_local)  # unsafe URLs are refused here
    try:
        if fetch:
            mirror.update()
        elif not mirror.exists():
            return LockedWheelSource(repo=mirror.url, ref=src.ref, commit=given)
    except InputError:
        return LockedWheelSource(repo=mirror.url, ref=src.ref, commit=given)
    commit = None
    if given:
        if not mirror.has_commit(given):
            raise InputError(f"{name}: source commit {given} does not exist in {mirror.url}")
        commit = mirror.resolve(given)
    if src.ref:
        head = mirror.resolve(src.ref)
        if commit is None:
            commit = head
        elif not is_ancestor(mirror.git, commit, head):
            raise InputError(f"{name}: source commit {given} is not on {src.ref} of {mirror.url}")
    return LockedWheelSource(repo=mirror.url, ref=src.ref, commit=commit, verified=commit is not None)


def lock_wheel_component(
    name: str,
    comp: WheelComponent,
    wheelhouses: list[Path],
    source_options: dict | None = None,
    *,
    image: ImageInterpreter | None = None,
    findings: Findings | None = None,
    download_dir: Path | None = None,
) -> LockedWheelComponent | None:
    """The pinned wheel (plan/wheels.py) and its source; None when only findings can say why not."""
    findings = findings if findings is not None else Findings()
    wheel = pinned_wheel(name, comp, wheelhouses, image, findings, download_dir=download_dir)
    if wheel is None:
        return None
    if comp.sha256 != TO_BE_LOCKED and comp.sha256 != wheel.sha256:
        raise InputError(
            f"{name}: {wheel.filename} has sha256 {wheel.sha256}, the manifest pins {comp.sha256}"
        )
    source = lock_wheel_source(name, comp.source, **(source_options or {})) if comp.source else None
    return LockedWheelComponent(
        name=name,
        distribution=comp.distribution,
        version=comp.version,
        filename=wheel.filename,
        sha256=wheel.sha256,
        source=source,
    )


def resolve_base_image(name: str, digest: str, *, engine: Engine) -> LockedBaseImage:
    """Keep a pinned digest; for ``to-be-locked`` ask the local Docker Engine (no registry here).

    ``engine``: the command's (a ``LazyEngine``: reached only here, when an image is to be locked)."""
    if digest != TO_BE_LOCKED:
        return LockedBaseImage(name=name, digest=digest)
    from releasekit.docker_engine import EngineError, EngineUnreachable, NoSuchImage

    try:
        facts = engine.inspect(name)
    except EngineUnreachable as exc:
        return LockedBaseImage(
            name=name, digest=None, note=f"to-be-locked: Docker Engine not reachable ({exc.cause})"
        )
    except NoSuchImage:
        return LockedBaseImage(
            name=name, digest=None, note="to-be-locked: image not present in the local Docker Engine"
        )
    except EngineError:
        return LockedBaseImage(
            name=name, digest=None, note="to-be-locked: Docker Engine not reachable (APIError)"
        )
    return LockedBaseImage(
        name=name,
        digest=facts.repo_digests[0] if facts.repo_digests else None,
        image_id=facts.id,
        note=None
        if facts.repo_digests
        else "local image without a registry digest: image_id recorded instead",
    )


def lock_builder(comp: GitComponent, loaded: LoadedManifest, *, engine: Engine) -> LockedBuilder | None:
    """The builder image of an ``environment.kind: image`` recipe: its Dockerfile's sha256 and its digest."""
    env = comp.build.environment if comp.build else None
    if env is None or env.kind != "image" or not env.image:
        return None
    dockerfile_sha = None
    if env.dockerfile:
        path = loaded.directory / env.dockerfile
        try:
            dockerfile_sha = file_sha256(path)
        except OSError as exc:
            raise InputError(
                f"builder {env.image}: cannot read {env.dockerfile}: {exc.strerror or exc}"
            ) from None
    found = resolve_base_image(env.image, env.digest or TO_BE_LOCKED, engine=engine)
    note = found.note
    if found.digest is None and found.image_id is None and dockerfile_sha:
        note = "built from its Dockerfile at build time (recipe locked by sha256)"
    base = resolve_base_image(env.base.name, env.base.digest, engine=engine) if env.base else None
    return LockedBuilder(
        image=env.image,
        dockerfile=env.dockerfile,
        dockerfile_sha256=dockerfile_sha,
        build_args=dict(env.build_args),
        base=base,
        digest=found.digest,
        image_id=found.image_id,
        note=note,
    )


def _composed_tree(name: str, comp: GitComponent, mirror: Mirror, locked: LockedGitComponent) -> str:
    from releasekit.findings import Findings
    from releasekit.plan.compose import Composable, compose_component

    findings = Findings()
    result = compose_component(Composable(name, comp, mirror, locked), findings, compare=False)
    if not findings.passed or result.tree is None:
        raise InputError(
            f"{name}: cannot lock a composed tree: {findings.errors[0].message if findings.errors else 'no tree'}"
        )
    return result.tree


def build_lock(
    loaded: LoadedManifest,
    *,
    cache_dir: Path | None = None,
    wheelhouses: list[Path] | None = None,
    allow_local: bool = False,
    fetch: bool = True,
    compose: bool = False,
    findings: Findings | None = None,
    strict: bool = False,
    download_dir: Path | None = None,
    model_sources: ModelSources | None = None,
    datasets: bool = False,
    forge: bool = True,
    forges: ForgeOpener,
    engine: Engine,
) -> Lock:
    """The lock of ``loaded``. The effects come from the command: ``forges`` opens the forge clients
    (not asked with ``forge`` off), ``engine`` resolves a ``to-be-locked`` image (a ``LazyEngine``,
    so a lock with none never reaches Docker)."""
    manifest = loaded.manifest
    houses = [h if h.is_absolute() else Path.cwd() / h for h in (wheelhouses or [])]
    options = {"cache_dir": cache_dir, "allow_local": allow_local, "fetch": fetch}
    components = _lock_components(
        _LockRun(loaded, houses, options, compose, findings, download_dir, engine=engine)
    )
    tc = manifest.toolchain
    toolchain = _locked_toolchain(tc, engine)
    branches = {n: c.canonical_branch for n, c in components.items() if isinstance(c, LockedGitComponent)}
    spec, found = manifest.validation, findings if findings is not None else Findings()
    lock = Lock(
        models=lock_models(spec, model_sources, loaded.directory, found, strict=strict)
        if model_sources
        else {},
        datasets=lock_datasets(spec, loaded.directory, found, strict=strict) if datasets else {},
        name=manifest.name,
        manifest=LockedManifest(path=loaded.path.name, sha256=loaded.sha256, name=manifest.name),
        components=components,
        toolchain=toolchain,
        forge=read_forge(loaded, forges=forges, use_forge=forge, branches=branches),
    )
    found.extend(lock_checks().run(LockContext(lock=lock, image=image_interpreter(tc), strict=strict)))
    return lock


@dataclass(frozen=True)
class _LockRun:
    """What locking each component reads: the manifest, the wheelhouses (absolute), the mirrors'
    options (cache_dir, allow_local, fetch), ``--compose``, the findings, the download directory and
    the engine a ``to-be-locked`` builder image is resolved with."""

    loaded: LoadedManifest
    houses: list[Path]
    options: dict[str, Any]
    compose: bool
    findings: Findings | None
    download_dir: Path | None
    engine: Engine


def _lock_components(run: _LockRun) -> dict[str, LockedGitComponent | LockedWheelComponent]:
    """Every component is tried: one that cannot be locked does not hide the next one's problem."""
    components: dict[str, LockedGitComponent | LockedWheelComponent] = {}
    problems: list[str] = []
    for name, comp in run.loaded.manifest.components.items():
        try:
            locked = _lock_one(name, comp, run)
        except (InputError, GitFailed) as exc:
            line = exc.one_line()
            problems.append(line if line.startswith((f"{name}:", f"{name}#")) else f"{name}: {line}")
        else:
            if locked is not None:
                components[name] = locked
    if problems:
        summary = problems[0] if len(problems) == 1 else f"{len(problems)} components cannot be locked"
        raise InputError(summary, details=problems if len(problems) > 1 else None)
    return components


def _lock_one(
    name: str, comp: GitComponent | WheelComponent, run: _LockRun
) -> LockedGitComponent | LockedWheelComponent | None:
    """One component's lock entry; a wheel that is not found is a finding (``None``), not an error."""
    if isinstance(comp, GitComponent):
        mirror = open_mirror(comp, run.loaded, **run.options)
        locked = lock_git_component(name, comp, mirror)
        builder = lock_builder(comp, run.loaded, engine=run.engine)
        if builder is not None:
            locked = locked.model_copy(update={"builder": builder})
        if run.compose and comp.merge_plan:
            locked = locked.model_copy(update={"composed_tree": _composed_tree(name, comp, mirror, locked)})
        return locked
    return lock_wheel_component(
        name,
        comp,
        run.houses,
        run.options,
        image=image_interpreter(run.loaded.manifest.toolchain),
        findings=run.findings,
        download_dir=run.download_dir,
    )


def _locked_toolchain(tc: Toolchain, engine: Engine) -> LockedToolchain:
    """The toolchain as locked; a base image that cannot be resolved here is locked by name only."""
    try:
        base = resolve_base_image(tc.base_image.name, tc.base_image.digest, engine=engine)
    except EnvironmentProblem:
        base = LockedBaseImage(name=tc.base_image.name)
    return LockedToolchain(
        base_image=base,
        cuda=tc.cuda,
        nccl=tc.nccl,
        pytorch=tc.pytorch,
        cuda_arch_list=list(tc.cuda_arch_list),
    )
