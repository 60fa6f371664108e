"""What the image should contain: the lock, joined with the build record and the manifest when given.

The lock alone names commits, trees and wheel hashes. The build record (``build.json``
of the release directory) adds what the build produced: versions, wheel files and their
hashes, import names, native arches. The manifest adds policy (forbidden distributions),
generated files and subdirectories. Each is read as a file; no later-stage internals.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from releasekit.records.build import BuildRecord, ComponentIdentity, ComponentRecord
from releasekit.records.lock import Lock, LockedGitComponent


class ExpectedComponent(ComponentIdentity):
    """A component as the image should hold it: its identity plus where and what to look for."""

    generated_files: list[str] = Field(default_factory=list)
    subdirectory: str | None = None
    installed: bool = True  # False for build repositories that ship nothing into the image


def expected_components(
    lock: Lock, record: BuildRecord | None, manifest: Any | None
) -> dict[str, ExpectedComponent]:
    out: dict[str, ExpectedComponent] = {}
    built: dict[str, ComponentRecord] = {c.name: c for c in (record.components if record else [])}
    declared = dict(manifest.components) if manifest is not None else {}
    toolchain_arches = list(lock.toolchain.cuda_arch_list)
    for name, locked in lock.components.items():
        b = built.get(name)
        m = declared.get(name)
        if isinstance(locked, LockedGitComponent):
            exp = ExpectedComponent(
                name=name, kind="git", repo=locked.repo, commit=locked.commit, tree=locked.tree
            )
        else:
            exp = ExpectedComponent(
                name=name,
                kind="wheel",
                distribution=locked.distribution,
                version=locked.version,
                wheel_filename=locked.filename,
                wheel_sha256=locked.sha256,
                repo=locked.source.repo if locked.source else None,
                commit=locked.source.commit if locked.source else None,
            )
        if b is not None:
            exp.version = b.version or exp.version
            exp.distribution = b.distribution or exp.distribution
            exp.wheel_filename = b.wheel_filename or exp.wheel_filename
            exp.wheel_sha256 = b.wheel_sha256 or exp.wheel_sha256
            exp.import_names = list(b.import_names)
            exp.native_arches = list(b.native_arches)
            exp.version_policy = b.version_policy
            exp.modifications = [dict(m) for m in b.modifications]
        if m is not None:
            exp.distribution = exp.distribution or getattr(m, "distribution", None)
            exp.import_names = exp.import_names or list(getattr(m, "import_names", []) or [])
            recipe = getattr(m, "build", None)
            if recipe is not None:
                exp.generated_files = sorted({*exp.generated_files, *recipe.generated_files})
                exp.subdirectory = recipe.subdirectory
                policy = getattr(recipe, "version_policy", None)
                exp.version_policy = getattr(policy, "policy", None) or exp.version_policy
                if recipe.native and not exp.native_arches:
                    exp.native_arches = list(recipe.cuda_arch_list or toolchain_arches)
            if getattr(m, "role", "runtime") == "build-repo":
                exp.installed = False
        if b is not None and exp.kind == "git" and not b.built:
            exp.installed = False  # recorded only: a build repository or a component without a recipe
        if exp.kind == "git" and not exp.distribution and b is None:
            # A git component that produced no wheel (a build repository): nothing to find installed.
            exp.installed = False
        out[name] = exp
    return out
