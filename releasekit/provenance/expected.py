"""What the image should contain: the lock, joined with the build record and the manifest when given.

The lock alone names commits, trees and wheel hashes. The build record (``build.json``
of the release directory) adds what the build produced: versions, wheel files and their
hashes, import names, native arches. The manifest adds policy (forbidden distributions),
generated files and subdirectories. Each is read as a file; no later-stage internals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from releasekit.errors import InputError
from releasekit.lock import Lock, LockedGitComponent


class ExpectedComponent(BaseModel):
    name: str
    kind: str  # git | wheel
    repo: str | None = None
    commit: str | None = None
    tree: str | None = None
    version: str | None = None
    distribution: str | None = None
    import_names: list[str] = Field(default_factory=list)
    wheel_filename: str | None = None
    wheel_sha256: str | None = None
    native_arches: list[str] = Field(default_factory=list)
    generated_files: list[str] = Field(default_factory=list)
    subdirectory: str | None = None
    installed: bool = True  # False for build repositories that ship nothing into the image
    version_policy: str | None = None  # scm | stamp | static (manifest build.version_policy)
    modifications: list[dict[str, Any]] = Field(default_factory=list)  # declared build-time changes (stamp)


class BuildRecordView(BaseModel):
    """The parts of ``build.json`` verify-provenance reads (tolerant of fields it does not know)."""

    model_config = ConfigDict(extra="ignore")

    lock_sha256: str | None = None
    manifest_sha256: str | None = None
    image_id: str | None = None
    image_tag: str | None = None
    components: list[dict[str, Any]] = Field(default_factory=list)


def read_build_record(path: Path) -> BuildRecordView:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read build record {path}: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a build record")
    components = data.get("components") or []
    if isinstance(components, dict):
        components = [{"name": k, **v} for k, v in components.items() if isinstance(v, dict)]
    return BuildRecordView(
        lock_sha256=_pick(data, "lock_sha256", "lock.sha256"),
        manifest_sha256=_pick(data, "manifest_sha256", "manifest.sha256"),
        image_id=_pick(data, "image_id", "image.id"),
        image_tag=_pick(data, "image_tag", "image.tag"),
        components=[c for c in components if isinstance(c, dict)],
    )


def _pick(record: dict[str, Any], *names: str) -> Any:
    for name in names:
        node: Any = record
        for part in name.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node not in (None, "", []):
            return node
    return None


def expected_components(lock: Lock, record: BuildRecordView | None, manifest: Any | None) -> dict[str, ExpectedComponent]:
    out: dict[str, ExpectedComponent] = {}
    built = {str(c.get("name")): c for c in (record.components if record else [])}
    declared = dict(manifest.components) if manifest is not None else {}
    toolchain_arches = list(lock.toolchain.cuda_arch_list)
    for name, locked in lock.components.items():
        b = built.get(name, {})
        m = declared.get(name)
        if isinstance(locked, LockedGitComponent):
            exp = ExpectedComponent(name=name, kind="git", repo=locked.repo, commit=locked.commit, tree=locked.tree)
        else:
            exp = ExpectedComponent(
                name=name, kind="wheel", distribution=locked.distribution, version=locked.version,
                wheel_filename=locked.filename, wheel_sha256=locked.sha256,
                repo=locked.source.repo if locked.source else None,
                commit=locked.source.commit if locked.source else None,
            )
        exp.version = _pick(b, "version") or exp.version
        exp.distribution = _pick(b, "distribution") or exp.distribution
        exp.wheel_filename = _pick(b, "wheel_filename", "wheel.filename") or exp.wheel_filename
        exp.wheel_sha256 = _pick(b, "wheel_sha256", "wheel.sha256") or exp.wheel_sha256
        exp.import_names = list(_pick(b, "import_names") or [])
        exp.native_arches = list(_pick(b, "native_arches", "native.arches") or [])
        exp.generated_files = list(_pick(b, "generated_files") or [])
        exp.version_policy = _pick(b, "version_policy")
        exp.modifications = [m for m in (_pick(b, "modifications") or []) if isinstance(m, dict)]
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
        if b and exp.kind == "git" and b.get("built") is False:
            exp.installed = False  # recorded only: a build repository or a component without a recipe
        if exp.kind == "git" and not exp.distribution and not b:
            # A git component that produced no wheel (a build repository): nothing to find installed.
            exp.installed = False
        out[name] = exp
    return out
