"""The lock: every moving name of a manifest resolved to an exact SHA or sha256.

``plan lock`` writes it; every later stage reads it (and only it, plus the manifest it
names by sha256). It is the contract between the stages, so it is versioned and strict.

It carries no wall-clock time: two locks of the same manifest and remote state are the
same bytes, and so is everything named after the lock's sha256. Locks written before that
(``locked_at``, schema still ``releasekit.lock/v1``) are read with that one field dropped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import Field, model_validator

from releasekit.bounded_read import MIB, read_bounded
from releasekit.records.base import Record, Strict, load_record, write_record
from releasekit.records.forge import ForgeData

LOCK_FILE: Final = "lock.json"
LOCK_SCHEMA: Final = "releasekit.lock/v1"

Sha1 = Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ImageDigest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class LockedManifest(Strict):
    path: str
    sha256: Sha256Hex
    name: str


class LockedPR(Strict):
    """One pull request of a merge plan (or a superseded/closed one), resolved."""

    number: int
    ref: str  # e.g. refs/pull/108/head
    head: Sha1
    tree: Sha1
    title: str | None = None
    role: Literal["planned", "superseded", "closed", "already_canonical"] = "planned"


class LockedCanonicalCommit(Strict):
    """An already-canonical change named by commit (e.g. d437a23cfd), resolved to a full SHA."""

    given: str
    commit: Sha1


class LockedBuilder(Strict):
    """A component's builder image: its recipe (Dockerfile by sha256) and, when the engine had it, its digest."""

    image: str
    dockerfile: str | None = None  # as the manifest names it (relative to the manifest)
    dockerfile_sha256: str | None = None
    build_args: dict[str, str] = Field(default_factory=dict)
    base: LockedBaseImage | None = None  # the builder's base (the BASE_IMAGE build ARG)
    digest: str | None = None  # sha256:… pinned by the manifest, or the engine's registry digest
    image_id: str | None = None  # the local image ID, when the engine had the image at lock time
    note: str | None = None


class LockedGitComponent(Strict):
    kind: Literal["git"] = "git"
    name: str
    repo: str  # credentials stripped
    canonical_branch: str
    commit: Sha1  # the commit the build uses: canonical head, or the manifest's pinned commit
    tree: Sha1
    commit_time: int  # committer time, seconds since the epoch: the build's SOURCE_DATE_EPOCH
    canonical_head: Sha1  # where the canonical branch pointed when locked
    pull_requests: list[LockedPR] = Field(default_factory=list)
    canonical_commits: list[LockedCanonicalCommit] = Field(default_factory=list)
    # Tree of the canonical head with every planned PR merged in order (``plan lock --compose``).
    composed_tree: Sha1 | None = None
    builder: LockedBuilder | None = None  # environment.kind: image


class LockedWheelSource(Strict):
    repo: str
    ref: str | None = None
    commit: str | None = None
    # True when plan lock reached the source repository and found the commit on the ref.
    verified: bool = False


class LockedWheelComponent(Strict):
    kind: Literal["wheel"] = "wheel"
    name: str
    distribution: str
    version: str
    filename: str
    sha256: Sha256Hex
    source: LockedWheelSource | None = None


LockedComponent = Annotated[LockedGitComponent | LockedWheelComponent, Field(discriminator="kind")]


class LockedBaseImage(Strict):
    name: str
    digest: str | None = None  # sha256:… when the manifest pins or the lock resolved it
    image_id: str | None = None  # the local Docker Engine's image ID, when it had the image
    note: str | None = None  # why the digest is missing, when it is


LockedBuilder.model_rebuild()
LockedGitComponent.model_rebuild()


class LockedToolchain(Strict):
    base_image: LockedBaseImage
    cuda: str | None = None
    nccl: str | None = None
    pytorch: str | None = None
    cuda_arch_list: list[str] = Field(default_factory=list)


class LockedModelFile(Strict):
    path: str  # relative to the model directory (the snapshot)
    sha256: Sha256Hex
    size: int


class LockedModel(Strict):
    """A model of ``validation.models`` (``plan lock --models``): its revision and the files hashed."""

    name: str  # the manifest's key under validation.models
    hub: str | None = None
    revision: Sha1 | None = None  # the hub commit of the cache snapshot; None for a plain directory
    source: Literal["hub-cache", "directory"]
    files: list[LockedModelFile]  # sorted by path; every file that was hashed


class LockedDataset(Strict):
    """A dataset of ``validation.datasets`` (``plan lock --datasets``): the file's sha256 and record count."""

    name: str
    path: str  # as the manifest names it (relative to the manifest)
    sha256: Sha256Hex
    samples: int  # non-empty lines (JSONL records)


class Lock(Record):
    kind = "lock"
    max_bytes = 16 * MIB  # checked on stat before reading (bounded_read.py)

    schema_: Literal["releasekit.lock/v1"] = Field(default=LOCK_SCHEMA, alias="schema")
    name: str
    manifest: LockedManifest
    components: dict[str, LockedComponent]
    toolchain: LockedToolchain
    # validation.models / validation.datasets locked by ``plan lock --models`` / ``--datasets``.
    models: dict[str, LockedModel] = Field(default_factory=dict)
    datasets: dict[str, LockedDataset] = Field(default_factory=dict)
    # What the forge said about every named PR (records/forge.py); None: a lock from before forge reading.
    forge: ForgeData | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_locked_at(cls, data: Any) -> Any:
        """Earlier v1 locks carried ``locked_at`` (a wall-clock time); it is ignored, never written."""
        if isinstance(data, dict) and "locked_at" in data:
            data = {k: v for k, v in data.items() if k != "locked_at"}
        return data

    def git_components(self) -> dict[str, LockedGitComponent]:
        return {k: v for k, v in self.components.items() if isinstance(v, LockedGitComponent)}

    def wheel_components(self) -> dict[str, LockedWheelComponent]:
        return {k: v for k, v in self.components.items() if isinstance(v, LockedWheelComponent)}

    def canonical_json(self) -> bytes:
        return canonical_json(self.model_dump(mode="json", by_alias=True))


def canonical_json(data: object) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8: hashes of it are stable."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def write_lock(lock: Lock, path: Path) -> str:
    """Write the lock (pretty, sorted, trailing newline) and return its sha256."""
    return hashlib.sha256(write_record(lock, path).encode()).hexdigest()


def lock_file_sha256(path: Path) -> str:
    """The lock's identity everywhere downstream (labels, receipts, publish): sha256 of the file's bytes."""
    return hashlib.sha256(read_bounded(path, Lock.max_bytes, within=path.parent)).hexdigest()


def read_lock(path: Path) -> Lock:
    return load_record(Lock, path)
