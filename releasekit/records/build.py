"""BuildRecord: ``OUTDIR/build.json``, what every later stage reads about a build."""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from releasekit.bounded_read import MIB
from releasekit.records.archive import ArchiveIndex
from releasekit.records.base import Record, Strict, load_record, write_record

BUILD_FILE: Final = "build.json"
RELEASE_NOTES_FILE: Final = "RELEASE.md"  # the build's notes; publish writes (and attaches) its own
BUILD_RECORD_SCHEMA: Final = "releasekit.build/v1"


class ComponentIdentity(Strict):
    """What names a component's output: its source and the wheel it makes. Shared by the build
    record and by what verify-provenance expects (``provenance/expected.py``)."""

    name: str
    kind: Literal["git", "wheel"]
    repo: str | None = None
    commit: str | None = None
    tree: str | None = None
    version: str | None = None
    distribution: str | None = None
    import_names: list[str] = Field(default_factory=list)
    wheel_filename: str | None = None
    wheel_sha256: str | None = None
    native_arches: list[str] = Field(default_factory=list)
    # Version policy (manifest build.version_policy): scm | stamp | static.
    version_policy: str | None = None
    # Declared build-time modifications (stamp): file (repo path, sha256 before/after, git blob after) or env var.
    modifications: list[dict[str, str | None]] = Field(default_factory=list)


class ComponentRecord(ComponentIdentity):
    role: str | None = None
    ref: str | None = None  # canonical branch (git) or the wheel's declared source ref
    builder_image: str | None = None  # image ID of the builder image (None: a fresh venv on the build host)
    built: bool = False  # False: recorded only (a build repository, or a component without a recipe)
    cache: Literal["hit", "miss", "none"] = "none"
    log: str | None = None  # relative to OUTDIR
    version_policy_reason: str | None = None  # the manifest's reason for the version policy
    builder_name: str | None = None  # the builder image's name (builder_image is its ID)
    environment: dict[str, str] = Field(default_factory=dict)  # the build's environment, secrets redacted
    network: bool = False  # the build's sandbox had a network: the manifest's sandbox.network grants build


class BaseImageRecord(Strict):
    name: str
    digest: str | None = None  # registry digest when there is one
    image_id: str  # the local image ID (sha256 of its config): what was actually built on


class ImageRecord(Strict):
    created: str
    source_date_epoch: int
    wheels_layer_digest: str
    wheels_layer_size: int
    base_layers_size: int
    archive: str | None = None  # relative to OUTDIR when kept


class CacheReport(Strict):
    hits: list[str] = Field(default_factory=list)
    misses: list[str] = Field(default_factory=list)
    layer: Literal["hit", "miss", "none"] = "none"


class BuildRecord(Record):
    kind = "build record"
    max_bytes = 16 * MIB  # checked on stat before reading (bounded_read.py)

    schema_: Literal["releasekit.build/v1"] = Field(default=BUILD_RECORD_SCHEMA, alias="schema")
    name: str
    lock_sha256: str
    manifest_sha256: str
    image_id: str  # sha256:… — the release's identity for every later stage
    image_tag: str | None = None
    toolchain: dict[str, object]
    base_image: BaseImageRecord
    image: ImageRecord
    components: list[ComponentRecord]
    labels: dict[str, str]
    cache: CacheReport
    smoke: dict[str, object]
    outputs: dict[str, str]  # name -> path relative to OUTDIR
    archive: ArchiveIndex | None = None  # the release source archive (also OUTDIR/archive.json)

    def write(self, path: Path) -> None:
        write_record(self, path)


def read_build_record(path: Path) -> BuildRecord:
    return load_record(BuildRecord, path)
