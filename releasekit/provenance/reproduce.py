"""Verification by reproduction: rebuild the release from the lock and the manifest, never from build.json.

The build is bit-reproducible (``releasekit/build/image.py``): the same wheels on the same
base give the same layer, the same config and so the same image ID. So the verifier
rebuilds each git component's wheel from its locked commit in its locked builder (the
build cache may answer, keyed by those inputs), takes each pinned wheel by its locked
sha256, installs them into the locked base as the build does, and computes the image
config the build would write. An image whose ID equals the reproduced one is proven byte
for byte; any other image is compared layer by layer and key by key, and its files are
accounted for against the base's own export plus the reproduced layer.

Nothing here reads the release directory's claims: its ``wheels/`` directory only serves as
a wheelhouse for pinned wheels, which are accepted by the lock's sha256 alone.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from releasekit.build import dockerfile
from releasekit.build.cache import BuildCache
from releasekit.build.image import SmokeReport, WheelInput, cached_base, image_config, install_layer, rfc3339
from releasekit.build.labels import image_labels
from releasekit.build.service import (
    BuildOptions,
    _build_git_component,
    _layer_key,
    _render_template,
    resolve_base,
)
from releasekit.build.wheelfile import sha256_file
from releasekit.build.wheelhouse import fetch_pinned_wheel
from releasekit.docker_engine import Engine
from releasekit.errors import BuildFailed, InputError
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import GitComponent, WheelComponent
from releasekit.records.build import BaseImageRecord, ComponentRecord
from releasekit.records.lock import Lock, LockedGitComponent

# What `releasekit build` writes into the image config (build/image.py: image_config).
HISTORY_COMMENT = "releasekit build: wheels installed by hash"


@dataclass
class Reproduction:
    """The image the lock and manifest produce, computed here."""

    image_id: str = ""
    config: dict[str, Any] = field(default_factory=dict)  # the whole image config JSON
    base: BaseImageRecord | None = None
    base_config: dict[str, Any] = field(default_factory=dict)
    base_diff_ids: list[str] = field(default_factory=list)
    layer_diff_id: str = ""
    layer: Path | None = None  # the reproduced release layer (a tar in the build cache)
    components: list[ComponentRecord] = field(default_factory=list)
    wheels: dict[str, Path] = field(default_factory=dict)  # component -> rebuilt or locked wheel
    error: str | None = None  # why nothing could be reproduced
    cache: dict[str, str] = field(default_factory=dict)  # component or "layer" -> hit | miss

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.image_id)

    @property
    def diff_ids(self) -> list[str]:
        return [*self.base_diff_ids, self.layer_diff_id]


@dataclass
class ReproduceOptions:
    lock_path: Path
    lock_sha256: str
    workdir: Path  # scratch space for wheels and logs
    wheelhouses: list[Path] = field(default_factory=list)
    build_cache_dir: Path | None = None
    git_cache_dir: Path | None = None
    no_cache: bool = False
    allow_local_repos: bool = False
    template: Path | None = None


def reproduce(engine: Engine, loaded: LoadedManifest, lock: Lock, opts: ReproduceOptions) -> Reproduction:
    """Rebuild the release image's config and layer; a failure is reported in ``error``, never raised
    (except an environment problem such as a missing base image: exit 2)."""
    out = Reproduction()
    base = resolve_base(engine, lock)  # EnvironmentProblem when the locked base is not here
    out.base = base
    manifest = loaded.manifest
    cache = BuildCache(opts.build_cache_dir, enabled=not opts.no_cache)
    bopts = BuildOptions(manifest=loaded.path, lock=opts.lock_path, no_cache=opts.no_cache,
                         cache_dir=opts.build_cache_dir, git_cache_dir=opts.git_cache_dir,
                         allow_local_repos=opts.allow_local_repos)
    outdir = opts.workdir
    (outdir / "wheels").mkdir(parents=True, exist_ok=True)
    (outdir / "logs").mkdir(parents=True, exist_ok=True)
    wheels: list[WheelInput] = []
    try:
        for name, locked in lock.components.items():
            declared = manifest.components.get(name)
            if declared is None:
                raise InputError(f"the manifest has no component {name}")
            if isinstance(locked, LockedGitComponent):
                if not isinstance(declared, GitComponent):
                    raise InputError(f"{name}: the lock has a git component, the manifest another kind")
                record = _build_git_component(name, locked, declared, loaded, lock, bopts, cache, outdir,
                                              opts.allow_local_repos, engine)
                out.cache[name] = record.cache
            else:
                if not isinstance(declared, WheelComponent):
                    raise InputError(f"{name}: the lock has a pinned wheel, the manifest another kind")
                fetch_pinned_wheel(locked, opts.wheelhouses, declared.index_url, outdir / "wheels")
                record = ComponentRecord(
                    name=name, kind="wheel", role="runtime",
                    repo=locked.source.repo if locked.source else None,
                    ref=locked.source.ref if locked.source else None,
                    commit=locked.source.commit if locked.source else None,
                    version=locked.version, distribution=locked.distribution,
                    import_names=list(declared.import_names),
                    wheel_filename=locked.filename, wheel_sha256=locked.sha256,
                )
            out.components.append(record)
            if record.wheel_filename and record.role != "build-repo":
                path = outdir / "wheels" / record.wheel_filename
                if sha256_file(path) != record.wheel_sha256:
                    raise BuildFailed(f"{name}: the reproduced wheel {path.name} is not the one just built")
                out.wheels[name] = path
                wheels.append(WheelInput(path=str(path), filename=record.wheel_filename,
                                         sha256=record.wheel_sha256 or "", distribution=record.distribution or "",
                                         version=record.version or "", import_names=record.import_names))
        if not wheels:
            raise InputError("no component produces a wheel to install")
        git_times = [c.commit_time for c in lock.git_components().values()]
        sde = max(git_times) if git_times else 0
        created = datetime.fromtimestamp(sde, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        labels = image_labels(components=out.components, base=base, created=created, lock_sha256=opts.lock_sha256,
                              manifest_sha256=loaded.sha256, release_name=lock.name)
        template = opts.template or dockerfile.TEMPLATES_DIR / dockerfile.DEFAULT_TEMPLATE
        settings = dockerfile.image_settings(_render_template(template, base, labels))
        key = _layer_key(base.image_id, wheels, sde)
        layer = cache.get_file("layers", key, "layer.tar")
        out.cache["layer"] = "hit" if layer is not None else "miss"
        if layer is None:
            with tempfile.TemporaryDirectory(prefix="releasekit-reproduce-") as tmp:
                fresh = Path(tmp) / "layer.tar"
                smoke: SmokeReport = install_layer(engine, base.image_id, wheels, sde, fresh, outdir / "logs" / "image.log")
                layer = cache.put_file("layers", key, "layer.tar", fresh)
                report = Path(tmp) / "smoke.json"
                report.write_text(smoke.model_dump_json())
                cache.put_file("layers", key, "smoke.json", report)
        out.layer = layer
        out.layer_diff_id = "sha256:" + sha256_file(layer)
        based = cached_base(engine, base.image_id, cache.root / "bases")
        out.base_config = based.config
        out.base_diff_ids = list(based.diff_ids)
        raw = image_config(based.config, out.layer_diff_id, settings, rfc3339(sde), HISTORY_COMMENT)
        out.image_id = "sha256:" + hashlib.sha256(raw).hexdigest()
        out.config = json.loads(raw)
    except (BuildFailed, InputError) as exc:
        out.error = str(exc)
    return out
