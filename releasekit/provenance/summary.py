"""The verification summary: an SLSA Verification Summary Attestation-shaped document for the image.

Written beside the build's provenance (``OUTDIR/verification_summary.json``) so that the
publish gate can read one file: which image, which lock (the policy), passed or failed,
and every finding.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from releasekit import __version__
from releasekit.findings import Finding

VERIFIER_ID = "https://github.com/releasekit/releasekit/verify-provenance"
POLICY_URI = "releasekit:verify-provenance/v1"


class Verifier(BaseModel):
    id: str = VERIFIER_ID
    version: dict[str, str] = Field(default_factory=lambda: {"releasekit": __version__})


class ResourceDescriptor(BaseModel):
    uri: str
    digest: dict[str, str] = Field(default_factory=dict)


class CheckOutcome(BaseModel):
    name: str
    passed: bool
    findings: int
    codes: list[str] = Field(default_factory=list)


class ReleasekitBlock(BaseModel):
    lock_sha256: str
    manifest_sha256: str
    image_tags: list[str] = Field(default_factory=list)
    checks: list[CheckOutcome] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)


class VerificationSummary(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    verifier: Verifier = Field(default_factory=Verifier)
    time_verified: str = Field(alias="timeVerified")
    resource_uri: str = Field(alias="resourceUri")
    policy: ResourceDescriptor
    input_attestations: list[ResourceDescriptor] = Field(default_factory=list, alias="inputAttestations")
    verification_result: str = Field(alias="verificationResult", pattern="^(PASSED|FAILED)$")
    releasekit: ReleasekitBlock


def make_summary(*, image_id: str, passed: bool, block: ReleasekitBlock, provenance: Path | None) -> VerificationSummary:
    attestations = []
    if provenance is not None and provenance.is_file():
        digest = hashlib.sha256(provenance.read_bytes()).hexdigest()
        attestations.append(ResourceDescriptor(uri=provenance.name, digest={"sha256": digest}))
    return VerificationSummary(
        time_verified=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        resource_uri=image_id,
        policy=ResourceDescriptor(uri=POLICY_URI, digest={"sha256": block.lock_sha256}),
        input_attestations=attestations,
        verification_result="PASSED" if passed else "FAILED",
        releasekit=block,
    )


def write_summary(summary: VerificationSummary, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = summary.model_dump(mode="json", by_alias=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
