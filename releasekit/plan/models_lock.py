"""Locking what a validation cell reads: models (``plan lock --models``) and datasets (``--datasets``).

A model is found, per ``validation.models`` entry, in this order: a directory given as
``NAME=DIR``; the manifest's ``hub`` repository in a Hugging Face cache given as ``DIR``
(read through ``huggingface_hub.scan_cache_dir``: no network); the manifest's own ``path``.
A cache snapshot's revision is the manifest's ``revision`` when it gives one (that
snapshot must be in the cache), else the cache's ``refs/main``. The files hashed are the
manifest's ``files``, or, when it lists none, the identity files present (config,
tokenizer, weight index): weight shards are hashed only when listed.

Every file is untrusted input (issue 34, item 6): only regular files are hashed (a FIFO or
device is refused before ``open()``), a symbolic link only when it resolves inside the model
directory (for a cache snapshot: inside that repository's ``blobs/``), and each file is
bounded on its ``stat`` before a byte is read: an identity file found by name at
``IDENTITY_MAX_BYTES``, a file the manifest lists (weights included) at ``LISTED_MAX_BYTES``.
A cache's ``refs/*`` are checked the same way before huggingface_hub reads them, and a
revision that is not a 40-hex commit is one line. Every refusal is exit 2, nothing written.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from releasekit.bounded_read import DATASET_MAX_BYTES, GIB, MIB, check_regular, read_bounded
from releasekit.digests import file_sha256
from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.manifest.validation import IDENTITY_FILES, TO_BE_LOCKED, Dataset, ModelRef, ValidationSpec
from releasekit.records.lock import LockedDataset, LockedModel, LockedModelFile

# A config, tokenizer or weight index: tokenizer.json of a large vocabulary is tens of MiB.
IDENTITY_MAX_BYTES = 256 * MIB
# A weight shard the manifest lists (shards are a few GiB; whole checkpoints can be one file).
LISTED_MAX_BYTES = 256 * GIB
_COMMIT = re.compile(r"[0-9a-f]{40}")

MODEL_CODES = (
    "MODEL_NOT_FOUND",
    "MODEL_FILE_MISSING",
    "MODEL_HASH_MISMATCH",
    "MODEL_NOTHING_HASHED",
    "DATASET_NOT_FOUND",
    "DATASET_CHANGED",
)


@dataclass
class ModelSources:
    """What ``--models`` named: Hugging Face caches, and directories of named models."""

    caches: list[Path] = field(default_factory=list)
    directories: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def parse(cls, values: list[str]) -> ModelSources:
        sources = cls()
        for value in values:
            name, eq, where = value.partition("=")
            if eq and name and "/" not in name:
                sources.directories[name] = Path(where)
            else:
                sources.caches.append(Path(value))
        for path in [*sources.caches, *sources.directories.values()]:
            if not path.is_dir():
                raise InputError(f"--models {path}: not a directory")
        return sources


@dataclass(frozen=True)
class _Snapshot:
    directory: Path
    revision: str | None
    # file path relative to the snapshot -> the file to read (a cache snapshot's files are links to blobs)
    files: dict[str, Path]
    # where every file must resolve: the model directory, or the cache repository's blobs/
    within: Path


def _from_hub_cache(key: str, model: ModelRef, caches: list[Path]) -> _Snapshot | None:
    from huggingface_hub import CacheNotFound, scan_cache_dir

    for cache in caches:
        _check_refs(cache)
        try:
            info = scan_cache_dir(cache)
        except CacheNotFound:
            raise InputError(f"--models {cache}: not a Hugging Face cache directory") from None
        except Exception as exc:  # huggingface_hub's own errors on a damaged cache: one line
            first = (str(exc).splitlines() or [""])[0][:200]
            raise InputError(
                f"--models {cache}: unreadable Hugging Face cache ({type(exc).__name__}: {first})"
            ) from None
        repo = next((r for r in info.repos if r.repo_type == "model" and r.repo_id == model.hub), None)
        if repo is None:
            continue
        wanted = model.revision if model.revision not in (None, TO_BE_LOCKED) else None
        if wanted is not None:
            revision = next((r for r in repo.revisions if r.commit_hash == wanted), None)
            if revision is None:
                raise InputError(
                    f"model '{key}': {model.hub} revision {wanted} is not in the cache {cache} "
                    f"(it has {', '.join(sorted(r.commit_hash[:12] for r in repo.revisions)) or 'none'})"
                )
        else:
            on_main = [r for r in repo.revisions if "main" in r.refs]
            if not on_main and len(repo.revisions) != 1:
                raise InputError(
                    f"model '{key}': {model.hub} has {len(repo.revisions)} snapshots in {cache} and no refs/main; "
                    "pin one with 'revision'"
                )
            revision = (on_main or list(repo.revisions))[0]
        if not _COMMIT.fullmatch(revision.commit_hash):
            raise InputError(
                f"--models {cache}: {model.hub} names snapshot {revision.commit_hash[:60]!r}, "
                "not a 40-hex commit; refused"
            )
        # The snapshot's own links, not huggingface_hub's resolved blob paths: each is checked to
        # lead into this repository's blobs/ when it is hashed.
        files = {
            f.file_path.relative_to(revision.snapshot_path).as_posix(): f.file_path for f in revision.files
        }
        blobs = revision.snapshot_path.parent.parent / "blobs"
        return _Snapshot(
            directory=revision.snapshot_path, revision=revision.commit_hash, files=files, within=blobs
        )
    return None


def _check_refs(cache: Path) -> None:
    """Each ``models--*/refs/*`` a small regular file before huggingface_hub opens it (a FIFO would hang it)."""
    try:
        refs = sorted(cache.glob("*/refs/**/*"))
    except OSError:
        return
    for ref in refs:
        if ref.is_dir() and not ref.is_symlink():
            continue
        check_regular(ref, limit=4096, within=ref.parent)


def _from_directory(directory: Path, revision: str | None) -> _Snapshot:
    # Listed without following links or opening anything: what each name is gets checked when hashed.
    files = {
        p.relative_to(directory).as_posix(): p
        for p in sorted(directory.rglob("*"))
        if p.is_symlink() or not p.is_dir()
    }
    return _Snapshot(directory=directory, revision=revision, files=files, within=directory)


def _where(
    key: str, model: ModelRef, sources: ModelSources, manifest_dir: Path
) -> tuple[_Snapshot, str] | None:
    given = model.revision if model.revision not in (None, TO_BE_LOCKED) else None
    if key in sources.directories:
        return _from_directory(sources.directories[key], given), "directory"
    if model.hub and sources.caches:
        found = _from_hub_cache(key, model, sources.caches)
        if found is not None:
            return found, "hub-cache"
    if model.path:
        local = Path(model.path) if Path(model.path).is_absolute() else manifest_dir / model.path
        if local.is_dir():
            return _from_directory(local, given), "directory"
    return None


def lock_model(
    key: str,
    model: ModelRef,
    sources: ModelSources,
    manifest_dir: Path,
    findings: Findings,
    *,
    strict: bool = False,
) -> LockedModel | None:
    found = _where(key, model, sources, manifest_dir)
    if found is None:
        looked = [*(str(c) for c in sources.caches), *([model.path] if model.path else [])]
        findings.add(
            "MODEL_NOT_FOUND",
            f"model '{key}' ({model.hub or model.path or model.name}) is in none of: {', '.join(looked) or 'nothing given'}; "
            "not locked",
            severity=Severity.error if strict else Severity.warning,
            path=key,
        )
        return None
    snapshot, kind = found
    wanted = [f.path for f in model.files] or [n for n in IDENTITY_FILES if n in snapshot.files]
    pinned = {f.path: f.sha256 for f in model.files if f.sha256 != TO_BE_LOCKED}
    files: list[LockedModelFile] = []
    listed = {f.path for f in model.files}
    for name in sorted(wanted):
        source = snapshot.files.get(name)
        if source is None or not (source.is_symlink() or source.exists()):
            findings.add(
                "MODEL_FILE_MISSING", f"model '{key}': {name} is not in {snapshot.directory}", path=key
            )
            continue
        limit = LISTED_MAX_BYTES if name in listed else IDENTITY_MAX_BYTES
        digest = file_sha256(source, max_bytes=limit, within=snapshot.within)
        if name in pinned and pinned[name] != digest:
            findings.add(
                "MODEL_HASH_MISMATCH",
                f"model '{key}': {name} has sha256 {digest}, the manifest pins {pinned[name]}",
                path=key,
            )
        files.append(LockedModelFile(path=name, sha256=digest, size=source.stat().st_size))
    if not files:
        # A lock that hashed nothing would say "pinned" about nothing.
        findings.add(
            "MODEL_NOTHING_HASHED",
            f"model '{key}': none of {', '.join(sorted(wanted)) or 'the identity files'} is in {snapshot.directory}",
            path=key,
        )
        return None
    return LockedModel(
        name=key,
        hub=model.hub,
        revision=snapshot.revision,
        source=kind,  # type: ignore[arg-type]
        files=files,
    )


def lock_models(
    spec: ValidationSpec,
    sources: ModelSources,
    manifest_dir: Path,
    findings: Findings,
    *,
    strict: bool = False,
) -> dict[str, LockedModel]:
    locked = {}
    for key in sorted(spec.models):
        model = lock_model(key, spec.models[key], sources, manifest_dir, findings, strict=strict)
        if model is not None:
            locked[key] = model
    return locked


def lock_dataset(
    key: str, dataset: Dataset, manifest_dir: Path, findings: Findings, *, strict: bool = False
) -> LockedDataset | None:
    path = manifest_dir / dataset.path
    if not path.is_file():
        findings.add(
            "DATASET_NOT_FOUND",
            f"dataset '{key}': {dataset.path} is not there; not locked",
            severity=Severity.error if strict else Severity.warning,
            path=key,
        )
        return None
    raw = read_bounded(path, DATASET_MAX_BYTES)
    sha = hashlib.sha256(raw).hexdigest()
    # Records as validate's readers count them: non-empty lines.
    samples = sum(1 for line in raw.decode("utf-8", errors="replace").splitlines() if line.strip())
    if dataset.sha256 is not None and dataset.sha256 != sha:
        findings.add(
            "DATASET_CHANGED",
            f"dataset '{key}': {dataset.path} has sha256 {sha}, the manifest pins {dataset.sha256}",
        )
    return LockedDataset(name=key, path=dataset.path, sha256=sha, samples=samples)


def lock_datasets(
    spec: ValidationSpec, manifest_dir: Path, findings: Findings, *, strict: bool = False
) -> dict[str, LockedDataset]:
    locked = {}
    for key in sorted(spec.datasets):
        dataset = lock_dataset(key, spec.datasets[key], manifest_dir, findings, strict=strict)
        if dataset is not None:
            locked[key] = dataset
    return locked
