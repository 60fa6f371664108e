"""``releasekit build --plan``: what the build will run for each component, with nothing built.

For each component: the fresh checkout (repository, commit, tree, where), the builder
(a venv with pinned requirements, or a builder image by name, Dockerfile and digest),
the environment (secrets redacted), the exact command, the version policy with what it
stamps, and the expected wheel filename. Without a lock, whatever the lock would
resolve is shown as ``to-be-locked``. Source files are read only from a git mirror that
is already on this machine (never fetched), to show a static version.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from packaging.utils import canonicalize_name
from pydantic import BaseModel, Field

from releasekit.builder import hygiene, stamp
from releasekit.builder.builders import build_args
from releasekit.builder.release_image import check_lock_matches, default_build_root
from releasekit.builder.service import check_host_environment
from releasekit.builder.wheel import build_environment, container_environment, sandbox_command
from releasekit.digests import file_sha256
from releasekit.manifest import TO_BE_LOCKED, LoadedManifest, load_manifest
from releasekit.manifest.models import BuildRecipe, GitComponent, WheelComponent
from releasekit.records.lock import (
    Lock,
    LockedBuilder,
    LockedGitComponent,
    LockedWheelComponent,
    lock_file_sha256,
    read_lock,
)

PLAN_SCHEMA = "releasekit.build-plan/v1"


class PlannedBuilder(BaseModel):
    kind: str  # venv | image | none
    image: str | None = None
    dockerfile: str | None = None
    dockerfile_sha256: str | None = None
    digest: str | None = None  # sha256:…, or to-be-locked
    requirements: list[str] = Field(default_factory=list)
    build_args: dict[str, str] = Field(
        default_factory=dict
    )  # incl. BASE_IMAGE, when built from its Dockerfile
    note: str | None = None


class PlannedComponent(BaseModel):
    name: str
    kind: str  # git | wheel
    role: str
    repo: str | None = None
    ref: str | None = None
    commit: str
    tree: str | None = None
    checkout: str | None = None  # where the fresh checkout is made (the fixed build path)
    builder: PlannedBuilder
    environment: dict[str, str] = Field(default_factory=dict)
    command: list[str] = Field(default_factory=list)
    version_policy: str | None = None
    version_policy_reason: str | None = None
    modifications: list[str] = Field(default_factory=list)
    expected_wheel: str | None = None
    native_arches: list[str] = Field(default_factory=list)


class BuildPlan(BaseModel):
    schema_: str = Field(default=PLAN_SCHEMA, alias="schema")
    name: str
    manifest_sha256: str
    lock_sha256: str | None = None
    base_image: str
    components: list[PlannedComponent]

    model_config = {"populate_by_name": True}

    def unresolved(self) -> list[str]:
        """Every place a ``to-be-locked`` value remains (empty once a complete lock is given)."""
        out = [c.name for c in self.components if TO_BE_LOCKED in c.model_dump_json()]
        return out + (["base-image"] if TO_BE_LOCKED in self.base_image else [])


def _source_file(
    declared: GitComponent, loaded: LoadedManifest, commit: str | None, rel: str, git_cache_dir: Path | None
) -> str | None:
    """A file of the locked commit from a mirror already on this machine; None when there is none."""
    if commit is None:
        return None
    from releasekit.git import GitFailed, Mirror

    try:
        mirror = Mirror(declared.repo, git_cache_dir, allow_local=True, base_dir=loaded.directory)
        if not mirror.exists() or not mirror.has_commit(commit):
            return None
        return mirror.git.run("show", f"{commit}:{rel}")
    except (GitFailed, OSError, ValueError):
        return None


def _source_version(
    declared: GitComponent,
    recipe: BuildRecipe,
    loaded: LoadedManifest,
    commit: str | None,
    git_cache_dir: Path | None,
) -> str | None:
    policy = recipe.version_policy
    sub = f"{recipe.subdirectory.strip('/')}/" if recipe.subdirectory else ""
    if policy.policy == "stamp" and policy.stamp == "file" and policy.file:
        text = _source_file(declared, loaded, commit, sub + policy.file, git_cache_dir)
        return text.strip() if text else None
    text = _source_file(declared, loaded, commit, sub + "pyproject.toml", git_cache_dir)
    if text is None:
        return None
    try:
        version = tomllib.loads(text).get("project", {}).get("version")
    except tomllib.TOMLDecodeError:
        return None
    return version if isinstance(version, str) else None


def expected_wheel(
    declared: GitComponent, recipe: BuildRecipe, commit: str | None, source_version: str | None
) -> str | None:
    if not declared.distribution:
        return None
    dist = canonicalize_name(declared.distribution).replace("-", "_")
    label = stamp.local_label(commit) if commit else "g<sha12>"
    policy = recipe.version_policy
    if policy.policy == "scm":
        version = f"<scm version>+{label}"
    elif policy.policy == "static":
        version = source_version or "<static version>"
    elif policy.stamp in ("setuptools-scm", "env"):
        version = f"{policy.base}+{label}"
    else:
        version = f"{source_version or '<X.Y.Z>'}+{label}"
    tag = "<cpXY>-<cpXY>-<platform>" if recipe.native else "py3-none-any"
    return f"{dist}-{version}-{tag}.whl"


def _builder(recipe: BuildRecipe, locked: LockedBuilder | None, manifest_dir: Path) -> PlannedBuilder:
    env = recipe.environment
    if env.kind == "venv":
        return PlannedBuilder(
            kind="venv", requirements=list(env.requirements), note="a fresh venv on the build host"
        )
    digest = env.digest if env.digest and env.digest != TO_BE_LOCKED else None
    dockerfile_sha = None
    note = None
    if locked is not None:
        digest = digest or locked.digest or locked.image_id
        if locked.base is not None and not (locked.base.digest or locked.base.image_id):
            note = f"builder base {locked.base.name}: {TO_BE_LOCKED} ({locked.base.note or 'not resolved'})"
        dockerfile_sha = locked.dockerfile_sha256
        note = locked.note
    elif env.dockerfile and (manifest_dir / env.dockerfile).is_file():
        dockerfile_sha = file_sha256(manifest_dir / env.dockerfile)
    if digest is None and locked is not None and dockerfile_sha:
        digest = f"built from {env.dockerfile} (sha256:{dockerfile_sha[:12]}) when absent"
    args = build_args(env, locked) if env.dockerfile else {}
    if env.base is not None and locked is None and env.base.digest == TO_BE_LOCKED:
        args["BASE_IMAGE"] = f"{env.base.name}@{TO_BE_LOCKED}"
    return PlannedBuilder(
        kind="image",
        image=env.image,
        dockerfile=env.dockerfile,
        dockerfile_sha256=dockerfile_sha,
        digest=digest or TO_BE_LOCKED,
        requirements=list(env.requirements),
        build_args=args,
        note=note,
    )


def _command(recipe: BuildRecipe, builder: PlannedBuilder, base_image: str, *, network: bool) -> list[str]:
    """The sandbox the build runs in, as a ``docker run`` line (a venv recipe: the release base image;
    ``network``: the manifest grants the build one)."""
    if builder.kind == "image":
        return [sandbox_command(recipe, builder.image or "", venv=False, network=network)]
    return [sandbox_command(recipe, base_image, venv=True, network=network)]


def plan_git(
    name: str,
    declared: GitComponent,
    locked: LockedGitComponent | None,
    lock: Lock | None,
    loaded: LoadedManifest,
    *,
    build_root: Path,
    git_cache_dir: Path | None,
) -> PlannedComponent:
    commit = locked.commit if locked else None
    recipe = declared.build
    out = PlannedComponent(
        name=name,
        kind="git",
        role=declared.role,
        repo=locked.repo if locked else declared.repo,
        ref=f"refs/heads/{locked.canonical_branch}" if locked else (declared.canonical_branch or "HEAD"),
        commit=commit or TO_BE_LOCKED,
        tree=locked.tree if locked else TO_BE_LOCKED,
        builder=PlannedBuilder(kind="none", note="recorded for provenance, not built"),
    )
    if recipe is None:
        return out
    out.checkout = str(build_root / name)
    toolchain_arches = (
        list(lock.toolchain.cuda_arch_list) if lock else list(loaded.manifest.toolchain.cuda_arch_list)
    )
    arches = list(recipe.cuda_arch_list or toolchain_arches) if recipe.native else []
    out.native_arches = arches
    out.builder = _builder(recipe, locked.builder if locked else None, loaded.directory)
    env = build_environment(recipe, locked.commit_time if locked else 0, commit or TO_BE_LOCKED, arches)
    if not locked:
        env["SOURCE_DATE_EPOCH"] = TO_BE_LOCKED
    stamp_env, changed = stamp.planned(recipe, commit)
    env.update(stamp_env)
    out.environment = hygiene.redact(container_environment(env))
    base = lock.toolchain.base_image.name if lock else loaded.manifest.toolchain.base_image.name
    out.command = _command(recipe, out.builder, base, network=declared.network_granted("build"))
    out.version_policy = recipe.version_policy.policy
    out.version_policy_reason = recipe.version_policy.reason
    out.modifications = changed + [f"{k}={v}" for k, v in stamp_env.items()]
    out.expected_wheel = expected_wheel(
        declared, recipe, commit, _source_version(declared, recipe, loaded, commit, git_cache_dir)
    )
    return out


def plan_wheel(name: str, declared: WheelComponent, locked: LockedWheelComponent | None) -> PlannedComponent:
    source = declared.source
    return PlannedComponent(
        name=name,
        kind="wheel",
        role="runtime",
        repo=source.repo if source else None,
        ref=source.ref if source else None,
        commit=(locked.source.commit if locked and locked.source else None)
        or (source.commit if source and source.commit else "")
        or "",
        builder=PlannedBuilder(kind="none", note="pinned wheel: fetched and checked by sha256, not built"),
        command=[
            f"fetch {declared.requirement} --hash sha256:{locked.sha256 if locked else declared.sha256}"
        ],
        expected_wheel=locked.filename if locked else (declared.filename or TO_BE_LOCKED),
    )


def make_plan(
    manifest: Path,
    lock_path: Path | None,
    *,
    build_root: Path | None = None,
    git_cache_dir: Path | None = None,
) -> BuildPlan:
    loaded = load_manifest(manifest)
    # The build would refuse an undeclared output-changing variable: so does its plan.
    check_host_environment(loaded.manifest.git_components(), os.environ)
    lock = read_lock(lock_path) if lock_path else None
    if lock is not None:
        check_lock_matches(loaded, lock)
    root = build_root or default_build_root()
    components: list[PlannedComponent] = []
    for name, declared in loaded.manifest.components.items():
        locked = lock.components.get(name) if lock else None
        if isinstance(declared, GitComponent):
            assert locked is None or isinstance(locked, LockedGitComponent)
            components.append(
                plan_git(name, declared, locked, lock, loaded, build_root=root, git_cache_dir=git_cache_dir)
            )
        else:
            assert locked is None or isinstance(locked, LockedWheelComponent)
            components.append(plan_wheel(name, declared, locked))
    base = loaded.manifest.toolchain.base_image
    if lock is not None:
        lb = lock.toolchain.base_image
        base_text = f"{lb.name}@{lb.digest or lb.image_id or TO_BE_LOCKED}"
    else:
        base_text = f"{base.name}@{base.digest}"
    return BuildPlan(
        name=loaded.manifest.name,
        manifest_sha256=loaded.sha256,
        lock_sha256=lock_file_sha256(lock_path) if lock_path else None,
        base_image=base_text,
        components=components,
    )


__all__ = ["BuildPlan", "PlannedComponent", "expected_wheel", "make_plan"]
