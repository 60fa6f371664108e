"""The evidence ``reproduce`` starts from: attached to a digest in a registry, or a local release directory.

Either way it ends as one directory holding ``archive.json``, ``archive/...`` and the
provenance, plus what the published image is (image ID, layer diff IDs, and a way to get a
published layer's tar for the file-level comparison). ``verify_evidence`` checks every hash
before anything is built: each archive file against ``archive.json``, the index and each file
against the provenance's byproducts, the provenance's subject against the published image ID,
and the lock against the bundles and wheels. Anything that does not match is refused with the
file (and, for a bundle, git's word on the object) named.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from releasekit.builder.image import base_layers
from releasekit.docker_engine import Engine
from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.git.bundle import bundle_heads, bundle_ref, verify_bundle_alone
from releasekit.publish.attachments import fetch_archive_blobs, fetch_attachments
from releasekit.records.archive import (
    ARCHIVE_DIR,
    ARCHIVE_FILE,
    ArchiveIndex,
    file_sha256,
    read_archive,
    safe_entry_path,
)
from releasekit.records.build import BUILD_FILE, read_build_record
from releasekit.records.lock import LockedGitComponent, read_lock
from releasekit.records.oci import Descriptor, ImageConfig, ImageManifest
from releasekit.records.provenance import PROVENANCE_FILE, Statement, parse_statement_text, read_statement
from releasekit.registry import Reference, RegistryCredentials, RegistryOpener, resolve_credentials

LayerTar = Callable[
    [int, Path], Path | None
]  # (layer index, scratch dir) -> an uncompressed layer tar, or None

SIGNATURES_NOTE = "not checked: this releasekit attaches and verifies no signatures (hashes only)"


@dataclass
class Published:
    source: str  # what the user named: REGISTRY/REPO@DIGEST or the directory
    directory: Path  # holds archive.json, archive/ and provenance.intoto.json
    index: ArchiveIndex
    statement: Statement
    image_id: str
    digest: str | None = None
    diff_ids: list[str] | None = None
    layer_tar: LayerTar | None = None
    signatures: str = SIGNATURES_NOTE
    notes: list[str] = field(default_factory=list)


# A layer's tar is rarely more than ten times its gzip; a decompression bomb is a thousand times.
LAYER_MAX_RATIO = 32
LAYER_MIN_CAP = 64 << 20


def _inflate(src: BinaryIO, dst: BinaryIO, cap: int, what: str) -> str:
    """Copy ``src`` (gzip, or plain when it does not start like gzip) to ``dst`` uncompressed, at most
    ``cap`` bytes; returns the sha256 of what was written."""
    sha = hashlib.sha256()
    written = 0
    gzipped = src.read(2) == b"\x1f\x8b"
    src.seek(0)
    inflate = zlib.decompressobj(wbits=31) if gzipped else None
    while chunk := src.read(1 << 20):
        pending = chunk
        while pending:
            if inflate is None:
                piece, pending = pending, b""
            else:
                try:
                    piece = inflate.decompress(pending, 1 << 20)
                except zlib.error as exc:
                    raise InputError(f"{what}: not a readable gzip stream ({exc})") from None
                pending = inflate.unconsumed_tail
            written += len(piece)
            if written > cap:
                raise InputError(
                    f"{what}: uncompresses past {cap} bytes ({LAYER_MAX_RATIO}x its size); refused"
                )
            sha.update(piece)
            dst.write(piece)
    return "sha256:" + sha.hexdigest()


def uncompressed_layer(blob: Path, out: Path, diff_id: str, what: str) -> None:
    """The layer ``blob`` (gzip or a plain tar) written to ``out`` as a tar, streamed, at most
    ``LAYER_MAX_RATIO`` times its size, and its sha256 the config's ``diff_id`` for it."""
    cap = max(LAYER_MIN_CAP, blob.stat().st_size * LAYER_MAX_RATIO)
    try:
        with blob.open("rb") as src, out.open("wb") as dst:
            digest = _inflate(src, dst, cap, what)
        if digest != diff_id:
            raise InputError(f"{what}: its tar does not hash to the config's diff_id {diff_id[:19]}")
    except BaseException:
        out.unlink(missing_ok=True)
        raise


def _engine_layer_tar(engine: Engine, image_id: str) -> LayerTar:
    """Layer tars of an image the local Docker Engine has (``docker save``)."""

    def get(index: int, scratch: Path) -> Path | None:
        if engine.image_id(image_id) is None:
            return None
        into = scratch / f"saved-{image_id[7:19]}"
        into.mkdir(parents=True, exist_ok=True)
        layers = base_layers(engine, image_id, into, keep_layers=True)
        if index >= len(layers.diff_ids):
            return None
        return into / f"{layers.diff_ids[index].split(':')[1]}.tar"

    return get


def from_directory(directory: Path, engine: Engine) -> Published:
    """A local release directory: archive.json, archive/, provenance.intoto.json and build.json."""
    if not directory.is_dir():
        raise InputError(f"--from {directory}: not a directory")
    index = read_archive(directory / ARCHIVE_FILE)
    statement = read_statement(directory / PROVENANCE_FILE)
    build = read_build_record(directory / BUILD_FILE)
    published = Published(
        source=str(directory), directory=directory, index=index, statement=statement, image_id=build.image_id
    )
    if engine.image_id(build.image_id) is not None:
        attrs = engine.image_attrs(build.image_id)
        published.diff_ids = list((attrs.get("RootFS") or {}).get("Layers") or [])
        published.layer_tar = _engine_layer_tar(engine, build.image_id)
    else:
        published.notes.append(
            f"the built image {build.image_id[:19]} is not in the Docker Engine: "
            "layers are compared by build.json's wheels layer only"
        )
        published.diff_ids = None
    return published


def _registry_layer_tar(
    open_registry: RegistryOpener,
    ref: Reference,
    credentials: RegistryCredentials | None,
    layers: list[Descriptor],
    diff_ids: list[str],
) -> LayerTar:
    """The published image's layer ``i`` as an uncompressed tar in a scratch directory."""

    def layer_tar(i: int, where: Path) -> Path | None:
        if i >= len(layers) or i >= len(diff_ids):
            return None
        with open_registry(ref.host, credentials) as again:
            # Streamed to a file, stopped at the descriptor's size, its digest checked.
            blob_path = Path(
                again.download_blob(ref.repository, layers[i].digest, str(where), layers[i].size)
            )
        out = where / f"published-layer-{i}.tar"
        try:
            uncompressed_layer(blob_path, out, diff_ids[i], f"{ref.name} layer {i}")
        finally:
            blob_path.unlink(missing_ok=True)
        return out

    return layer_tar


def from_registry(text: str, scratch: Path, open_registry: RegistryOpener) -> Published:
    """REGISTRY/REPO@DIGEST or REGISTRY/REPO:TAG (resolved to its digest first): the image and its attachments."""
    ref = Reference.parse(text)
    if not ref.digest and not ref.tag:
        raise InputError(f"{text!r}: expected REGISTRY/REPO@DIGEST or REGISTRY/REPO:TAG")
    credentials = resolve_credentials(ref.host)
    with open_registry(ref.host, credentials) as client:
        client.ping()
        blob = client.get_manifest(ref.repository, ref.digest or ref.tag or "")
        if blob is None:
            raise InputError(f"{text} does not exist in the registry")
        try:
            manifest = ImageManifest.parse(blob.data)
            if manifest.config is None:
                raise ValueError("no config: a manifest list or index")
            image_id = manifest.config.digest
            layers = list(manifest.layers)
            config = ImageConfig.parse(client.get_blob(ref.repository, image_id))
            if config.rootfs is None:
                raise ValueError("the image config has no rootfs")
            diff_ids = list(config.rootfs.diff_ids)
        except ValueError as exc:
            raise InputError(f"{text} is not a single image manifest ({exc})") from None
        fetched = fetch_attachments(client, ref.repository, blob.digest)
        if fetched is None:
            raise InputError(f"{ref.name}@{blob.digest} has no releasekit evidence attached")
        if ARCHIVE_FILE not in fetched.files:
            raise InputError(
                f"{ref.name}@{blob.digest}: the attached evidence has no source archive ({ARCHIVE_FILE})"
            )
        if PROVENANCE_FILE not in fetched.files:
            raise InputError(f"{ref.name}@{blob.digest}: the attached evidence has no {PROVENANCE_FILE}")
        directory = scratch / "evidence"
        directory.mkdir(parents=True, exist_ok=True)
        for name in (ARCHIVE_FILE, PROVENANCE_FILE):
            (directory / name).write_text(fetched.files[name], encoding="utf-8")
        fetch_archive_blobs(client, ref.repository, blob.digest, directory)
    index = read_archive(directory / ARCHIVE_FILE)
    statement = parse_statement_text(fetched.files[PROVENANCE_FILE], f"attached {PROVENANCE_FILE}")

    return Published(
        source=f"{ref.name}@{blob.digest}",
        directory=directory,
        index=index,
        statement=statement,
        image_id=image_id,
        digest=blob.digest,
        diff_ids=diff_ids,
        layer_tar=_registry_layer_tar(open_registry, ref, credentials, layers, diff_ids),
    )


def _refuse(message: str) -> InputError:
    return InputError(message, hint="refusing to rebuild from evidence that does not verify")


def verify_evidence(pub: Published) -> None:
    """Every hash, before anything is built; InputError (exit 2) naming the first file that does not match."""
    index = pub.index
    byproducts = {
        b.name: (b.digest or {}).get("sha256") for b in pub.statement.predicate.runDetails.byproducts
    }
    if not byproducts:
        raise _refuse(
            "the provenance lists no source archive (no byproducts): this release has no archive to reproduce from"
        )
    index_sha = file_sha256(
        pub.directory / ARCHIVE_FILE, max_bytes=ArchiveIndex.max_bytes, within=pub.directory
    )
    if byproducts.get(ARCHIVE_FILE) != index_sha:
        raise _refuse(
            f"{ARCHIVE_FILE} is sha256 {index_sha}, the provenance lists {byproducts.get(ARCHIVE_FILE)}"
        )
    subjects = [s.digest.get("sha256") for s in pub.statement.subject]
    if not subjects or f"sha256:{subjects[0]}" != pub.image_id:
        raise _refuse(f"the provenance's subject is not the published image {pub.image_id}")
    for entry in index.entries:
        if not safe_entry_path(entry.path):
            raise _refuse(f"{ARCHIVE_FILE}: unsafe path {entry.path!r}")
        path = pub.directory / entry.path
        if not os.path.lexists(path):
            raise _refuse(f"archive file {entry.path} is missing")
        # A regular file inside the directory, no larger than listed (on stat, before hashing): else exit 2.
        actual = file_sha256(path, max_bytes=entry.size, within=pub.directory)
        if actual != entry.sha256:
            detail = ""
            if entry.kind == "git-bundle":
                try:
                    verify_bundle_alone(path)
                except InputError as exc:
                    detail = f"; git: {exc.message}"
                what = f" (component {entry.component}, commit {entry.commit})"
            else:
                what = f" (component {entry.component})" if entry.component else ""
            raise _refuse(
                f"archive file {entry.path}{what} is sha256 {actual}, {ARCHIVE_FILE} lists {entry.sha256}{detail}"
            )
        if byproducts.get(entry.path) != entry.sha256:
            raise _refuse(
                f"archive file {entry.path}: the provenance lists sha256 {byproducts.get(entry.path)}, "
                f"{ARCHIVE_FILE} {entry.sha256}"
            )
    lock_entry, manifest_entry = index.entry("lock"), index.entry("manifest")
    if lock_entry.sha256 != index.lock_sha256 or manifest_entry.sha256 != index.manifest_sha256:
        raise _refuse(f"{ARCHIVE_FILE}: the lock or manifest file is not the one the index names")
    lock = read_lock(pub.directory / lock_entry.path)
    bundles = {e.component: e for e in index.bundles()}
    wheels = {e.component: e for e in index.wheels()}
    for name, locked in lock.components.items():
        if isinstance(locked, LockedGitComponent):
            entry_b = bundles.get(name)
            if (
                entry_b is None
                or entry_b.commit != locked.commit
                or entry_b.tree != locked.tree
                or entry_b.repo != locked.repo
            ):
                raise _refuse(f"{name}: the archive has no bundle of the locked commit {locked.commit}")
        else:
            entry_w = wheels.get(name)
            if entry_w is None or entry_w.sha256 != locked.sha256:
                raise _refuse(f"{name}: the archive has no wheel with the locked sha256 {locked.sha256}")


def archive_findings(pub: Published) -> Findings:
    """What the archive holds beyond what it lists, after ``verify_evidence``: each an error, and nothing is built.

    A file under ``archive/`` that ``archive.json`` does not list (a wheel the build would find
    in its wheelhouse) is ``ARCHIVE_UNLISTED_FILE``; a bundle with any ref beyond the one its
    entry names (a ``refs/replace/*`` that would stand in for a locked object, another branch) is
    ``BUNDLE_EXTRA_REFS``.
    """
    found = Findings()
    listed = {e.path for e in pub.index.entries}
    root = pub.directory / ARCHIVE_DIR
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + sorted(d for d in dirs if (Path(folder) / d).is_symlink()):
            rel = (Path(folder) / name).relative_to(pub.directory).as_posix()
            if rel not in listed:
                what = "a wheel" if name.endswith(".whl") else "a file"
                found.add(
                    "ARCHIVE_UNLISTED_FILE",
                    f"{what} in the archive that {ARCHIVE_FILE} does not list: refusing to build beside it",
                    path=rel,
                )
    for entry in pub.index.bundles():
        want = entry.ref or bundle_ref(entry.component or "")
        heads = bundle_heads(pub.directory / entry.path)
        extra = sorted(ref for ref in heads if ref != want)
        if extra:
            found.add(
                "BUNDLE_EXTRA_REFS",
                f"the bundle of {entry.component} holds {len(extra)} ref(s) beyond {want}: "
                f"{', '.join(extra[:5])}",
                path=entry.path,
                component=entry.component,
            )
    return found


def scratch_dir(workdir: Path | None) -> Path:
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="releasekit-reproduce-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        raise InputError(f"--workdir {workdir} is not empty")
    return workdir
