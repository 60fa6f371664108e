"""``verification_summary.json``: an SLSA Verification Summary Attestation-shaped document.

``verify-provenance`` writes it beside the build's provenance (``releasekit.provenance.summary``
fills it in); the publish gate reads it: which image, which lock (the policy), passed or failed,
every finding, and the sha256 of the provenance file it verified. The summary may also arrive
wrapped in an in-toto Statement (``predicate`` holding the summary, ``subject`` the image).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field, PrivateAttr

from releasekit import __version__
from releasekit.findings import FindingList, Severity
from releasekit.records.base import Record, RecordError, Strict
from releasekit.records.provenance import ResourceDescriptor

VERIFICATION_SUMMARY_FILE: Final = "verification_summary.json"
VERIFICATION_SCHEMA: Final = "releasekit.verification-summary/v1"
VERIFIER_ID = "https://github.com/releasekit/releasekit/verify-provenance"
POLICY_URI = "releasekit:verify-provenance/v1"


class Verifier(Strict):
    id: str = VERIFIER_ID
    version: dict[str, str] = Field(default_factory=lambda: {"releasekit": __version__})


class CheckOutcome(Strict):
    name: str
    passed: bool
    findings: int
    codes: list[str] = Field(default_factory=list)


class ReleasekitBlock(Strict):
    lock_sha256: str
    manifest_sha256: str
    image_tags: list[str] = Field(default_factory=list)
    checks: list[CheckOutcome] = Field(default_factory=list)
    findings: FindingList = Field(default_factory=list)


class VerificationSummary(Record):
    kind = "verification summary"

    schema_: Literal["releasekit.verification-summary/v1"] = Field(
        default=VERIFICATION_SCHEMA, alias="schema"
    )
    verifier: Verifier = Field(default_factory=Verifier)
    time_verified: str = Field(alias="timeVerified")
    resource_uri: str = Field(alias="resourceUri")
    policy: ResourceDescriptor
    attestations: list[ResourceDescriptor] = Field(default_factory=list, alias="inputAttestations")
    verification_result: Literal["PASSED", "FAILED"] = Field(alias="verificationResult")
    releasekit: ReleasekitBlock

    # sha256 digests of the subjects of an in-toto Statement the summary came wrapped in.
    _subject_sha256: list[str] = PrivateAttr(default_factory=list)

    @classmethod
    def from_json(cls, data: Any, source: str | None = None) -> VerificationSummary:
        """The bare summary, or one wrapped in an in-toto Statement (its subjects are kept)."""
        subjects: list[str] = []
        if isinstance(data, dict) and "predicate" in data and "_type" in data:
            for subject in data.get("subject") or []:
                digest = subject.get("digest", {}).get("sha256") if isinstance(subject, dict) else None
                if digest:
                    subjects.append(str(digest))
            data = data["predicate"]
        summary = super().from_json(data, source)
        summary._subject_sha256 = subjects
        return summary

    # What the publish gate asks of a summary.
    @property
    def result(self) -> str:
        return self.verification_result

    @property
    def lock_sha256(self) -> str:
        return self.releasekit.lock_sha256

    @property
    def error_codes(self) -> list[str]:
        return [f.code for f in self.releasekit.findings if f.severity == Severity.error]

    @property
    def input_attestations(self) -> dict[str, str]:
        """File name -> sha256 of every input attestation named by a URI with a sha256 digest."""
        return {
            a.uri.rsplit("/", 1)[-1]: a.digest["sha256"]
            for a in self.attestations
            if a.uri and "sha256" in a.digest
        }

    def names_image(self, image_id: str) -> bool:
        hex_id = image_id.removeprefix("sha256:")
        return self.resource_uri.endswith(image_id) or hex_id in self._subject_sha256


def read_verification_summary(path: Path) -> VerificationSummary:
    """The summary file, bare or inside an in-toto Statement; anything else is a one-line RecordError."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise RecordError(f"{path}: no such file (run verify-provenance first)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: not a readable JSON file ({exc})") from None
    return VerificationSummary.from_json(data, str(path))
