"""``releasekit reproduce``: rebuild a published release from its attached source archive alone.

1. get the evidence (``REGISTRY/REPO@DIGEST``, a tag resolved to its digest, or ``--from DIR``);
2. verify every hash before building (``evidence.verify_evidence``);
3. fill fresh git mirrors from the archive's bundles (no remote is contacted: the mirrors
   already hold every locked commit, so the build never fetches), take wheel components from
   the archive's wheels, and run the ordinary ``build`` stage with a fresh build cache;
4. compare the rebuilt image with the published one: image ID, layer diff IDs, each
   component's wheel, and for a differing layer its first differing file and the component
   that installs it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.builder.image import base_layers
from releasekit.builder.release_image import BuildOptions
from releasekit.docker_engine import Engine
from releasekit.findings import Findings
from releasekit.git.bundle import mirror_from_bundle
from releasekit.records.archive import ARCHIVE_DIR, file_sha256
from releasekit.records.build import BuildRecord
from releasekit.records.lock import LOCK_FILE
from releasekit.records.provenance import PROVENANCE_FILE, Statement
from releasekit.records.reproduce_receipt import (
    ReproducedBuild,
    ReproduceExamined,
    ReproduceReceipt,
    runner_identity,
)
from releasekit.registry import RegistryOpener
from releasekit.reproduce.compare import (
    ComponentComparison,
    Difference,
    LayerComparison,
    compare_layers,
    first_file_difference,
    owner_of,
    tar_files,
)
from releasekit.reproduce.evidence import (
    Published,
    archive_findings,
    from_directory,
    from_registry,
    scratch_dir,
    verify_evidence,
)


class ArchiveSummary(BaseModel):
    files: int
    size: int
    verified: bool
    signatures: str


class ReproduceResult(BaseModel):
    source: str
    digest: str | None
    same: bool
    published_image_id: str
    rebuilt_image_id: str
    layers: list[LayerComparison] = Field(default_factory=list)
    components: list[ComponentComparison] = Field(default_factory=list)
    first_difference: Difference | None = None
    archive: ArchiveSummary
    workdir: str
    notes: list[str] = Field(default_factory=list)
    # What the archive holds beyond what it lists (evidence.archive_findings): then nothing was built.
    findings: Findings = Field(default_factory=Findings)
    # What ``--receipt FILE`` writes (None: no registry digest was reproduced, e.g. ``--from DIR``).
    receipt: ReproduceReceipt | None = None


def _receipt(pub: Published, result: ReproduceResult, runner: str | None) -> ReproduceReceipt | None:
    """The receipt of this reproduction of a registry digest: what promote --reproduced reads."""
    if pub.digest is None:
        return None
    internal = pub.statement.predicate.buildDefinition.internalParameters
    build_runner = internal.get("runner")
    return ReproduceReceipt(
        digest=pub.source,
        published_image_id=pub.image_id,
        rebuilt_image_id=result.rebuilt_image_id,
        reproduced=result.same and bool(result.layers) and all(layer.same for layer in result.layers),
        build=ReproducedBuild(
            lock_sha256=pub.index.lock_sha256,
            manifest_sha256=pub.index.manifest_sha256,
            provenance_sha256=file_sha256(
                pub.directory / PROVENANCE_FILE, max_bytes=Statement.max_bytes, within=pub.directory
            ),
            runner=build_runner if isinstance(build_runner, str) else None,
        ),
        reproducer=runner_identity(runner),
        examined=ReproduceExamined(layers=len(result.layers), archive_files=len(pub.index.entries)),
    )


def _components(pub: Published, record: BuildRecord) -> list[ComponentComparison]:
    published = {s.name: s.digest.get("sha256") for s in pub.statement.subject if s.name}
    out: list[ComponentComparison] = []
    for c in record.components:
        if c.kind != "git" or not c.wheel_filename:
            continue
        was = published.get(c.wheel_filename)
        out.append(
            ComponentComparison(
                name=c.name,
                wheel=c.wheel_filename,
                published_sha256=was,
                rebuilt_sha256=c.wheel_sha256,
                same=was == c.wheel_sha256,
            )
        )
    return out


def _rebuilt_layer(engine: Engine, image_id: str, index: int, scratch: Path) -> Path | None:
    into = scratch / "rebuilt-layers"
    into.mkdir(parents=True, exist_ok=True)
    layers = base_layers(engine, image_id, into, keep_layers=True)
    if index >= len(layers.diff_ids):
        return None
    return into / f"{layers.diff_ids[index].split(':')[1]}.tar"


@dataclass(frozen=True)
class _Compared:
    """The published release and its rebuild, compared: layer by layer and wheel by wheel."""

    pub: Published
    record: BuildRecord
    layers: list[LayerComparison]
    components: list[ComponentComparison]


def _first_difference(compared: _Compared, engine: Engine, work: Path) -> Difference:
    pub, record, layers, components = compared.pub, compared.record, compared.layers, compared.components
    differing = next((layer for layer in layers if not layer.same), None)
    if differing is None and not layers:
        return _no_layer_list(pub, record, components)
    if differing is None:
        return Difference(
            what="image-config",
            published=pub.image_id,
            rebuilt=record.image_id,
            message="every layer is the same: the image configuration (labels, env, created) differs",
        )
    base_count = len(layers) - 1
    if differing.index < base_count:
        return Difference(
            what="layer",
            component="base-image",
            layer=differing.index,
            published=differing.published,
            rebuilt=differing.rebuilt,
            message=f"base image layer {differing.index} differs",
        )
    return _wheels_layer_difference(compared, differing, engine, work)


def _no_layer_list(pub: Published, record: BuildRecord, components: list[ComponentComparison]) -> Difference:
    """No published layer list (a release directory whose image is gone): the wheels from build.json say it."""
    wheel_diff = next((c for c in components if not c.same), None)
    if wheel_diff:
        return Difference(
            what="wheel",
            component=wheel_diff.name,
            file=wheel_diff.wheel,
            published=wheel_diff.published_sha256,
            rebuilt=wheel_diff.rebuilt_sha256,
            message=f"component {wheel_diff.name}: {wheel_diff.wheel} is not the published wheel",
        )
    return Difference(
        what="image-config",
        published=pub.image_id,
        rebuilt=record.image_id,
        message="the image IDs differ; the published layers are not available to compare",
    )


def _wheels_layer_difference(
    compared: _Compared, differing: LayerComparison, engine: Engine, work: Path
) -> Difference:
    """The wheels layer differs: name the first differing file and the component whose wheel owns it."""
    pub, record, components = compared.pub, compared.record, compared.components
    wheels = {
        c.name: work / "release" / "wheels" / c.wheel_filename
        for c in record.components
        if c.wheel_filename and (work / "release" / "wheels" / c.wheel_filename).is_file()
    }
    scratch = work / "compare"
    scratch.mkdir(exist_ok=True)
    published_tar = pub.layer_tar(differing.index, scratch) if pub.layer_tar else None
    rebuilt_tar = _rebuilt_layer(engine, record.image_id, differing.index, scratch)
    wheel_diff = next((c for c in components if not c.same), None)
    if published_tar is None or rebuilt_tar is None:
        name = wheel_diff.name if wheel_diff else None
        return Difference(
            what="layer",
            component=name,
            layer=differing.index,
            published=differing.published,
            rebuilt=differing.rebuilt,
            message=f"wheels layer differs{f' (component {name}: its wheel differs)' if name else ''}; "
            "the published layer is not available for a file comparison",
        )
    found = first_file_difference(tar_files(published_tar), tar_files(rebuilt_tar))
    if found is None:
        return Difference(
            what="layer",
            layer=differing.index,
            published=differing.published,
            rebuilt=differing.rebuilt,
            message="the wheels layers hold the same files but differ as tars (order or metadata)",
        )
    path, was, now = found
    owner = owner_of(path, wheels) or (wheel_diff.name if wheel_diff else None)
    return Difference(
        what="file",
        component=owner,
        layer=differing.index,
        file=path,
        published=was,
        rebuilt=now,
        message=f"component {owner or '(unowned)'}: file /{path} differs "
        f"(published {was or 'absent'}, rebuilt {now or 'absent'})",
    )


# The whole build (``builder.service.run_build``), passed in by the commands layer: this stage runs the
# ordinary build but depends only on the builder's library.
Rebuild = Callable[[BuildOptions, Engine, Callable[[str], None]], BuildRecord]


def reproduce(
    *,
    engine: Engine,
    rebuild: Rebuild,
    open_registry: RegistryOpener,
    reference: str | None = None,
    from_dir: Path | None = None,
    workdir: Path | None = None,
    keep: bool = False,
    runner: str | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> ReproduceResult:
    """``runner``: the reproducer's name for its receipt (``--runner``; default ``runner_identity()``)."""
    work = scratch_dir(workdir)
    try:
        pub = (
            from_directory(from_dir, engine)
            if from_dir is not None
            else from_registry(reference or "", work, open_registry)
        )
        progress(
            f"evidence: {pub.source} (image {pub.image_id[:19]}, archive {len(pub.index.entries)} file(s), "
            f"{pub.index.total_size:,} B)"
        )
        verify_evidence(pub)
        refused = archive_findings(pub)
        if refused.errors:
            return _refused(pub, refused, runner)
        progress("evidence: every archive file matches archive.json and the provenance")
        record = rebuild(_rebuild_options(pub, work, progress), engine, progress)
        rebuilt_layers = list((engine.image_attrs(record.image_id).get("RootFS") or {}).get("Layers") or [])
        layers = compare_layers(pub.diff_ids, rebuilt_layers)
        components = _components(pub, record)
        same = record.image_id == pub.image_id and all(layer.same for layer in layers)
        result = ReproduceResult(
            source=pub.source,
            digest=pub.digest,
            same=same,
            published_image_id=pub.image_id,
            rebuilt_image_id=record.image_id,
            layers=layers,
            components=components,
            archive=ArchiveSummary(
                files=len(pub.index.entries),
                size=pub.index.total_size,
                verified=True,
                signatures=pub.signatures,
            ),
            workdir=str(work) if keep or workdir is not None else "",
            notes=list(pub.notes),
        )
        if not same:
            result.first_difference = _first_difference(
                _Compared(pub, record, layers, components), engine, work
            )
        result.receipt = _receipt(pub, result, runner)
        return result
    finally:
        if not keep and workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _refused(pub: Published, findings: Findings, runner: str | None) -> ReproduceResult:
    """The archive holds more than it lists: nothing is built, and the result is not the same (exit 1)."""
    result = ReproduceResult(
        source=pub.source,
        digest=pub.digest,
        same=False,
        published_image_id=pub.image_id,
        rebuilt_image_id="",
        archive=ArchiveSummary(
            files=len(pub.index.entries), size=pub.index.total_size, verified=False, signatures=pub.signatures
        ),
        workdir="",
        notes=list(pub.notes),
        findings=findings,
    )
    result.receipt = _receipt(pub, result, runner)
    return result


def _rebuild_options(pub: Published, work: Path, progress: Callable[[str], None]) -> BuildOptions:
    """The build again from the archive alone: its manifest, lock, wheels and git bundles, no remote contacted."""
    lock_entry, manifest_entry = pub.index.entry("lock"), pub.index.entry("manifest")
    inputs = work / "inputs"
    inputs.mkdir()
    manifest = inputs / Path(manifest_entry.path).name
    lock = inputs / LOCK_FILE
    shutil.copyfile(pub.directory / manifest_entry.path, manifest)
    shutil.copyfile(pub.directory / lock_entry.path, lock)
    git_cache = work / "git"
    for entry in pub.index.bundles():
        assert entry.repo and entry.commit
        mirror_from_bundle(entry.repo, pub.directory / entry.path, git_cache, [entry.commit])
        progress(f"git: {entry.component} {entry.commit[:12]} from {entry.path} (no remote contacted)")
    return BuildOptions(
        manifest=manifest,
        lock=lock,
        outdir=work / "release",
        wheelhouses=[pub.directory / ARCHIVE_DIR / "wheels"],
        cache_dir=work / "cache",
        git_cache_dir=git_cache,
        allow_local_repos=True,
    )
