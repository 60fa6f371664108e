"""OCI image-spec documents the release reads from and writes to a registry.

``ImageManifest`` (an image or an artifact manifest, OCI or Docker schema 2: the same
shape), ``Descriptor`` (a blob or manifest it points at), ``ImageIndex`` (a manifest list,
and the referrers API's answer), ``ImageConfig`` (the parts of an image config blob read
here) and ``EvidenceConfig`` (the config blob of the evidence artifact publish attaches).

Registries add fields of their own: these models keep unknown fields (they are not release
files, so they carry no releasekit schema). A manifest releasekit writes is serialised by
``ImageManifest.to_bytes`` only (sorted keys, two-space indent, no ``null`` fields), so the
same inputs give the same manifest digest.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from releasekit.records.base import describe

OCI_MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX: Final = "application/vnd.oci.image.index.v1+json"
TITLE: Final = "org.opencontainers.image.title"


class _Oci(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "document") -> Any:
        """The document; a ``ValueError`` with one line when the bytes are not one."""
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise ValueError(f"not an OCI {what}: {describe(exc)}") from None

    def to_bytes(self) -> bytes:
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(data, indent=2, sort_keys=True).encode()


class Descriptor(_Oci):
    mediaType: str | None = None  # noqa: N815 - the OCI spec's field names
    digest: str
    size: int | None = None
    artifactType: str | None = None  # noqa: N815
    annotations: dict[str, str] | None = None

    @property
    def title(self) -> str | None:
        return (self.annotations or {}).get(TITLE)


class ImageManifest(_Oci):
    """An image manifest; ``config`` is absent for a manifest list or index."""

    schemaVersion: int = 2  # noqa: N815
    mediaType: str | None = None  # noqa: N815
    artifactType: str | None = None  # noqa: N815
    config: Descriptor | None = None
    layers: list[Descriptor] = Field(default_factory=list)
    subject: Descriptor | None = None
    annotations: dict[str, str] | None = None

    @classmethod
    def parse(cls, data: bytes) -> ImageManifest:
        manifest: ImageManifest = cls.from_bytes(data, "image manifest")
        return manifest

    @property
    def subject_digest(self) -> str | None:
        return self.subject.digest if self.subject else None


class ImageIndex(_Oci):
    """A manifest list / index: what the OCI 1.1 referrers API answers."""

    schemaVersion: int = 2  # noqa: N815
    mediaType: str | None = None  # noqa: N815
    manifests: list[Descriptor] = Field(default_factory=list)

    @field_validator("manifests", mode="before")
    @classmethod
    def _objects_only(cls, value: Any) -> Any:
        # An entry that is not an object names nothing: left out, not a reason to drop the index.
        return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else value

    @classmethod
    def parse(cls, data: bytes) -> ImageIndex:
        index: ImageIndex = cls.from_bytes(data, "image index")
        return index


class RootFs(_Oci):
    diff_ids: list[str] = Field(default_factory=list)


class ImageConfig(_Oci):
    """An image config blob: the container ``config`` (Env, Labels, ...) and the layers' diff IDs."""

    config: dict[str, Any] | None = None
    rootfs: RootFs | None = None

    @classmethod
    def parse(cls, data: bytes) -> ImageConfig:
        config: ImageConfig = cls.from_bytes(data, "image config")
        return config


class EvidenceConfig(BaseModel):
    """The config blob of the evidence artifact: which image, which lock, which manifest digest."""

    image_id: str
    lock_sha256: str
    subject: str

    def to_bytes(self) -> bytes:
        return json.dumps(self.model_dump()).encode()
