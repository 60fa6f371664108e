"""Verification by reproduction: rebuild the release from the lock and the manifest, never from build.json.

The build is bit-reproducible (``releasekit/builder/image.py``): the same wheels on the same
base give the same layer, the same config and so the same image ID. So the verifier
rebuilds each git component's wheel from its locked commit in its locked builder, takes each
pinned wheel by its locked sha256, installs them into the locked base as the build does, and
computes the image config the build would write. None of it comes from the build cache the
build wrote: the verifier builds into its own (``provenance/vcache.py``), and it reads the
base's config and layer list from the Docker Engine, checked against the engine's image ID and
layer list for the locked base (``checked_base``). An image whose ID equals the reproduced one is proven byte
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
from pathlib import Path
from typing import Any

from releasekit.builder.image import HISTORY_COMMENT, BaseLayers, base_layers, image_config, rfc3339
from releasekit.builder.release_image import (
    BuildOptions,
    BuildRun,
    build_components,
    default_template,
    release_layer,
    release_settings,
    resolve_base,
)
from releasekit.digests import file_sha256
from releasekit.docker_engine import Engine
from releasekit.errors import BuildFailed, InputError
from releasekit.manifest import LoadedManifest
from releasekit.provenance.vcache import VerifierCache
from releasekit.records.build import BaseImageRecord, ComponentRecord
from releasekit.records.lock import Lock


@dataclass
class Reproduction:
    """The image the lock and manifest produce, computed here."""

    image_id: str = ""
    config: dict[str, Any] = field(default_factory=dict)  # the whole image config JSON
    base: BaseImageRecord | None = None
    base_config: dict[str, Any] = field(default_factory=dict)
    base_diff_ids: list[str] = field(default_factory=list)
    layer_diff_id: str = ""
    layer: Path | None = None  # the reproduced release layer (a tar in the verifier's cache)
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
    cache: VerifierCache  # the verifier's own (never the build's): provenance/vcache.py
    wheelhouses: list[Path] = field(default_factory=list)
    git_cache_dir: Path | None = None
    allow_local_repos: bool = False
    template: Path | None = None


def reproduce(engine: Engine, loaded: LoadedManifest, lock: Lock, opts: ReproduceOptions) -> Reproduction:
    """Rebuild the release image's config and layer through the build's own steps; a failure is reported in
    ``error``, never raised (except an environment problem such as a missing base image: exit 2)."""
    out = Reproduction()
    base = resolve_base(engine, lock)  # EnvironmentProblem when the locked base is not here
    out.base = base
    cache = opts.cache
    bopts = BuildOptions(
        manifest=loaded.path,
        lock=opts.lock_path,
        cache_dir=cache.root,
        build_root=opts.workdir / "src",  # checkouts of its own, not the build's
        git_cache_dir=opts.git_cache_dir,
        allow_local_repos=opts.allow_local_repos,
        wheelhouses=list(opts.wheelhouses),
    )
    outdir = opts.workdir
    (outdir / "wheels").mkdir(parents=True, exist_ok=True)
    (outdir / "logs").mkdir(parents=True, exist_ok=True)
    run = BuildRun(
        options=bopts,
        loaded=loaded,
        lock=lock,
        lock_sha256=opts.lock_sha256,
        engine=engine,
        base=base,
        cache=cache,
        outdir=outdir,
        template=opts.template or default_template(),
        allow_local=opts.allow_local_repos,
    )
    try:
        components, wheels = build_components(run)
        out.components = components
        for record in components:
            if record.kind == "git":
                out.cache[record.name] = record.cache
            if record.wheel_filename and record.role != "build-repo":
                path = outdir / "wheels" / record.wheel_filename
                if file_sha256(path) != record.wheel_sha256:
                    raise BuildFailed(
                        f"{record.name}: the reproduced wheel {path.name} is not the one just built"
                    )
                out.wheels[record.name] = path
        if not wheels:
            raise InputError("no component produces a wheel to install")
        settings = release_settings(run, components)
        sde = settings.source_date_epoch
        layer, _smoke, out.cache["layer"] = release_layer(run, wheels, sde)
        out.layer = layer
        out.layer_diff_id = "sha256:" + file_sha256(layer)
        based = checked_base(engine, base.image_id, cache)
        out.base_config = based.config
        out.base_diff_ids = list(based.diff_ids)
        raw = image_config(based.config, out.layer_diff_id, settings.image, rfc3339(sde), HISTORY_COMMENT)
        out.image_id = "sha256:" + hashlib.sha256(raw).hexdigest()
        out.config = json.loads(raw)
    except (BuildFailed, InputError) as exc:
        out.error = str(exc)
    return out


def checked_base(engine: Engine, base_id: str, cache: VerifierCache) -> BaseLayers:
    """The locked base's config and layer list, read from the engine (``docker save``) and checked against it.

    The config's sha256 must be the image ID the engine reports for the locked base, and its
    ``rootfs.diff_ids`` the layers the engine lists for it: a config or layer list from anywhere
    else (a cache entry with an ``Entrypoint`` or extra "base" layers) cannot pass. Kept in this
    process's memory only, by image ID.
    """
    known = cache.bases.get(base_id)
    if known is not None:
        return known
    with tempfile.TemporaryDirectory(prefix="releasekit-verify-base-") as tmp:
        saved = base_layers(engine, base_id, Path(tmp), keep_layers=False)
    engine_id = engine.image_id(base_id)
    engine_layers = [str(d) for d in (engine.image_attrs(base_id).get("RootFS") or {}).get("Layers") or []]
    if saved.config_digest != base_id or engine_id != base_id:
        raise BuildFailed(
            f"the locked base's saved config is {saved.config_digest or 'unknown'}, "
            f"the engine's image ID for it {engine_id}: the base cannot be checked"
        )
    config_layers = list((saved.config.get("rootfs") or {}).get("diff_ids") or [])
    if saved.diff_ids != engine_layers or config_layers != engine_layers:
        raise BuildFailed(
            f"the locked base's saved layer list ({len(saved.diff_ids)} layer(s)) is not the "
            f"{len(engine_layers)} layer(s) the engine lists for {base_id[:19]}"
        )
    cache.bases[base_id] = saved
    return saved
