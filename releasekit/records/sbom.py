"""``sbom.cdx.json``: the image's CycloneDX SBOM, made by ``verify-provenance`` from what it verified.

The document is CycloneDX JSON (``bomFormat``/``specVersion``), a standard format, so it carries
no releasekit ``schema`` field; ``releasekit.provenance.sbom`` writes it with
``cyclonedx-python-lib``. Readers (the publish gate, the release notes) need only what names the
image and how many components it lists: ``SbomView`` keeps those and ignores the rest.

The serial number is a function of the image ID (``sbom_serial``), so the same image verified
twice gives the same document, and a reader can tell which image an SBOM describes from its
serial number as well as from ``metadata.component``.
"""

from __future__ import annotations

import uuid
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from releasekit.records.base import RecordError, describe

SBOM_FILE: Final = "sbom.cdx.json"
SBOM_MEDIA: Final = "application/vnd.cyclonedx+json"
SBOM_SPEC_VERSION: Final = "1.6"
FILE_PROPERTY: Final = "releasekit:file"  # one file: "<sha256>  <path>" (sha256sum's line)
# uuid5 namespace of releasekit's SBOM serial numbers (itself uuid5 of the URL namespace).
SERIAL_NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/releasekit/releasekit/sbom")


def sbom_serial(image_id: str) -> uuid.UUID:
    """The serial number of the SBOM of ``image_id`` (``sha256:<hex>``): uuid5, never random."""
    return uuid.uuid5(SERIAL_NAMESPACE, image_id)


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class SbomProperty(_Loose):
    name: str
    value: str | None = None


class SbomImage(_Loose):
    type: str
    name: str
    version: str | None = None
    bom_ref: str | None = Field(default=None, alias="bom-ref")
    properties: list[SbomProperty] = Field(default_factory=list)


class SbomMetadata(_Loose):
    timestamp: str | None = None
    component: SbomImage


class SbomComponent(_Loose):
    type: str
    name: str
    version: str | None = None
    purl: str | None = None
    properties: list[SbomProperty] = Field(default_factory=list)
    components: list[SbomComponent] = Field(default_factory=list)


class SbomView(_Loose):
    """What releasekit reads back of a CycloneDX SBOM (unknown fields are CycloneDX's, kept in the text)."""

    bom_format: Literal["CycloneDX"] = Field(alias="bomFormat")
    spec_version: str = Field(alias="specVersion")
    serial_number: str = Field(alias="serialNumber")
    version: int
    metadata: SbomMetadata
    components: list[SbomComponent] = Field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any, source: str = SBOM_FILE) -> SbomView:
        if not isinstance(data, dict) or data.get("bomFormat") != "CycloneDX":
            raise RecordError(f"{source}: not a CycloneDX document (no bomFormat 'CycloneDX')")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RecordError(f"{source}: not a CycloneDX SBOM releasekit reads: {describe(exc)}") from None

    def names_image(self, image_id: str) -> bool:
        """The SBOM describes ``image_id``: its serial number and its subject both say so."""
        return (
            self.serial_number == sbom_serial(image_id).urn
            and self.metadata.component.version == image_id
            and self.metadata.component.type == "container"
        )

    def counts(self) -> dict[str, int]:
        """Components by type, nested ones included (``library``, ``container``, ...), and ``files``: the
        files listed with their sha256 (``releasekit:file`` properties, of the image and its components)."""
        out: dict[str, int] = {}
        files = sum(p.name == FILE_PROPERTY for p in self.metadata.component.properties)
        stack = list(self.components)
        while stack:
            comp = stack.pop()
            out[comp.type] = out.get(comp.type, 0) + 1
            files += sum(p.name == FILE_PROPERTY for p in comp.properties)
            stack.extend(comp.components)
        return {**dict(sorted(out.items())), "files": files}
