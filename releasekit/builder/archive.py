"""The release source archive, made at build time: everything a rebuild needs besides the base image.

``OUTDIR/archive/``: ``git/<component>.bundle`` (the locked commit and the objects it needs),
``wheels/<file>`` (the locked wheels of wheel components), the manifest and the lock, listed
with sha256 in ``OUTDIR/archive.json``. Each bundle is proven complete before the build goes on:
verified in an empty repository, fetched into an empty mirror and checked out at the locked
commit, whose tree must be the locked tree. A bundle that lacks an object fails the build now,
not the reproduction years later.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from releasekit.errors import BuildFailed, InputError
from releasekit.git import Mirror, bundle_ref, check_bundle, create_bundle
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import GitComponent
from releasekit.records.archive import (
    ARCHIVE_DIR,
    ARCHIVE_FILE,
    ArchiveEntry,
    ArchiveIndex,
    EntryKind,
    file_sha256,
    write_archive,
)
from releasekit.records.lock import Lock, LockedGitComponent, LockedWheelComponent
from releasekit.records.provenance import ResourceDescriptor


def _entry(outdir: Path, rel: str, kind: EntryKind, **fields: str | None) -> ArchiveEntry:
    path = outdir / rel
    return ArchiveEntry(path=rel, kind=kind, sha256=file_sha256(path), size=path.stat().st_size, **fields)


def make_archive(
    *,
    outdir: Path,
    loaded: LoadedManifest,
    lock: Lock,
    lock_path: Path,
    lock_sha256: str,
    git_cache_dir: Path | None,
    allow_local: bool,
    progress: Callable[[str], None],
) -> ArchiveIndex:
    root = outdir / ARCHIVE_DIR
    shutil.rmtree(root, ignore_errors=True)
    (root / "git").mkdir(parents=True)
    (root / "wheels").mkdir()
    entries: list[ArchiveEntry] = []
    for name, locked in lock.components.items():
        if isinstance(locked, LockedGitComponent):
            entries.append(
                _bundle_entry(
                    outdir, name, locked, loaded, git_cache_dir, allow_local=allow_local, progress=progress
                )
            )
        else:
            assert isinstance(locked, LockedWheelComponent)
            entries.append(_wheel_entry(outdir, name, locked))
    manifest_rel = f"{ARCHIVE_DIR}/{loaded.path.name}"
    shutil.copyfile(loaded.path, outdir / manifest_rel)
    entries.append(_entry(outdir, manifest_rel, "manifest"))
    lock_rel = f"{ARCHIVE_DIR}/lock.json"
    shutil.copyfile(lock_path, outdir / lock_rel)
    entries.append(_entry(outdir, lock_rel, "lock"))
    if entries[-1].sha256 != lock_sha256 or entries[-2].sha256 != loaded.sha256:
        raise BuildFailed("the manifest or lock changed on disk during the build")
    index = ArchiveIndex(
        name=lock.name, lock_sha256=lock_sha256, manifest_sha256=loaded.sha256, entries=entries
    )
    write_archive(index, outdir / ARCHIVE_FILE)
    progress(f"archive: {len(entries)} file(s), {index.total_size} B, listed in {ARCHIVE_FILE}")
    return index


def _bundle_entry(
    outdir: Path,
    name: str,
    locked: LockedGitComponent,
    loaded: LoadedManifest,
    git_cache_dir: Path | None,
    *,
    allow_local: bool,
    progress: Callable[[str], None],
) -> ArchiveEntry:
    """A git component's bundle, proven now to check out the locked commit and tree with no remote."""
    declared = loaded.manifest.components[name]
    assert isinstance(declared, GitComponent)
    mirror = Mirror(declared.repo, git_cache_dir, allow_local=allow_local, base_dir=loaded.directory)
    if not mirror.exists() or not mirror.has_commit(locked.commit):
        mirror.update()
    rel = f"{ARCHIVE_DIR}/git/{name}.bundle"
    ref = bundle_ref(name)
    history_absent = create_bundle(mirror, locked.commit, ref, outdir / rel)
    with tempfile.TemporaryDirectory(prefix="releasekit-archive-check-") as tmp:
        try:
            check_bundle(outdir / rel, locked.repo, locked.commit, locked.tree, Path(tmp))
        except InputError as exc:
            raise BuildFailed(
                f"{name}: the archive's bundle cannot rebuild {locked.commit[:12]}: {exc.message}"
            ) from None
    entry = _entry(
        outdir,
        rel,
        "git-bundle",
        component=name,
        repo=locked.repo,
        ref=ref,
        commit=locked.commit,
        tree=locked.tree,
    )
    progress(f"archive: {rel} ({entry.size} B, {locked.commit[:12]} checked out from the bundle alone)")
    if history_absent:
        # A partial snapshot: the image is still rebuilt from the bundle, but its history is not in it.
        progress(
            f"archive: {rel} holds {locked.commit[:12]} without its history (its parents are the bundle's "
            f"prerequisites): the mirror lacks an object of it: {history_absent}"
        )
    return entry


def _wheel_entry(outdir: Path, name: str, locked: LockedWheelComponent) -> ArchiveEntry:
    """A locked wheel, copied as built or fetched; a digest other than the lock's fails the build."""
    rel = f"{ARCHIVE_DIR}/wheels/{locked.filename}"
    shutil.copyfile(outdir / "wheels" / locked.filename, outdir / rel)
    entry = _entry(outdir, rel, "wheel", component=name)
    if entry.sha256 != locked.sha256:
        raise BuildFailed(
            f"{name}: {locked.filename} is sha256 {entry.sha256[:16]}, the lock pins {locked.sha256[:16]}"
        )
    return entry


def archive_byproducts(index: ArchiveIndex, outdir: Path) -> list[ResourceDescriptor]:
    """The archive's files (and its index) as provenance byproducts: name = path, digest = sha256."""
    out = [
        ResourceDescriptor(
            name=e.path,
            digest={"sha256": e.sha256},
            annotations={
                k: v
                for k, v in {"kind": e.kind, "component": e.component, "gitCommit": e.commit}.items()
                if v
            },
        )
        for e in index.entries
    ]
    out.append(ResourceDescriptor(name=ARCHIVE_FILE, digest={"sha256": file_sha256(outdir / ARCHIVE_FILE)}))
    return out
