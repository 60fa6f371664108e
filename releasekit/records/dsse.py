"""DSSE envelopes (``*.dsse.json``): the signed form of an in-toto statement (or of the SBOM).

``{"payload": b64, "payloadType": type, "signatures": [{"keyid": id, "sig": b64}]}``.
The signing and verifying live in ``releasekit.signing.dsse``; this is the file's model and
the envelope names beside the statements they sign.
"""

from __future__ import annotations

import json
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from releasekit.records.provenance import PROVENANCE_FILE
from releasekit.records.sbom import SBOM_FILE
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE

ENVELOPE_SUFFIX: Final = ".dsse.json"


def envelope_name(statement_file: str) -> str:
    """``provenance.intoto.json`` -> ``provenance.intoto.dsse.json``."""
    return statement_file.removesuffix(".json") + ENVELOPE_SUFFIX


PROVENANCE_ENVELOPE_FILE: Final = envelope_name(PROVENANCE_FILE)
SUMMARY_ENVELOPE_FILE: Final = envelope_name(VERIFICATION_SUMMARY_FILE)
# The SBOM is CycloneDX, not a statement: its envelope's payload is the document's exact bytes.
SBOM_ENVELOPE_FILE: Final = envelope_name(SBOM_FILE)


class EnvelopeSignature(BaseModel):
    model_config = ConfigDict(extra="ignore")

    keyid: str = ""
    sig: str


class Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    payload: str
    payload_type: str = Field(alias="payloadType")
    signatures: list[EnvelopeSignature] = Field(default_factory=list)

    def to_json(self) -> bytes:
        data = {
            "payload": self.payload,
            "payloadType": self.payload_type,
            "signatures": [{"keyid": s.keyid, "sig": s.sig} for s in self.signatures],
        }
        return (json.dumps(data, indent=2) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Envelope:
        """The envelope; a ``ValueError`` naming the first bad field (``loc: msg``) when it is not one."""
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            spot = ".".join(str(p) for p in first.get("loc", ())) or "(top)"
            raise ValueError(f"{spot}: {first.get('msg')}") from None
