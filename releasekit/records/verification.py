"""``verification_summary.json``: an SLSA Verification Summary Attestation (VSA v1) in an in-toto Statement.

``verify-provenance`` writes it beside the build's provenance (``releasekit.provenance.summary``
fills it in), signed or not: always an in-toto Statement v1 (``VerificationStatement``) whose
``subject`` is the image (its ID as the sha256 digest), whose ``predicateType`` is
``https://slsa.dev/verification_summary/v1`` and whose ``predicate`` is the summary
(``VerificationSummary``: the VSA v1 fields, plus releasekit's ``schema`` and ``releasekit``
block, which VSA consumers ignore). With a key, ``verification_summary.dsse.json`` signs the
file's exact bytes. Every reader (the publish gate, promote, reproduce's fetch of the attached
evidence) reads it through ``VerificationStatement``: a bare predicate is refused.
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal

from pydantic import Field

from releasekit import __version__
from releasekit.findings import FindingList, Severity
from releasekit.records.base import Record, Strict
from releasekit.records.intoto import STATEMENT_TYPE, VERIFICATION_SUMMARY_TYPE
from releasekit.records.provenance import ResourceDescriptor

VERIFICATION_SUMMARY_FILE: Final = "verification_summary.json"
VERIFICATION_SCHEMA: Final = "releasekit.verification-summary/v1"
VERIFIER_ID = "https://github.com/releasekit/releasekit/verify-provenance"
POLICY_URI = "releasekit:verify-provenance/v1"
SLSA_VERSION: Final = "1.0"
# What a PASSED verification attests (VSA ``verifiedLevels``): provenance exists, names the
# image, and was verified by reproduction; nothing about the build platform's isolation.
PASSED_LEVELS: Final = ("SLSA_BUILD_LEVEL_1",)
FAILED_LEVELS: Final = ("FAILED",)


class Verifier(Strict):
    id: str = VERIFIER_ID
    version: dict[str, str] = Field(default_factory=lambda: {"releasekit": __version__})


# At most this many examined items are named per check (sorted); ``count`` is always the whole.
MAX_EXAMINED_LISTED: Final = 50


class CheckOutcome(Strict):
    """One verify-provenance check: its status, what it examined (``examined`` the kind, ``count``
    how many, ``items`` the first ``MAX_EXAMINED_LISTED`` by name) and, when it was not
    applicable or not run, why (``reason``). ``passed`` is true only for ``status: passed``."""

    name: str
    status: Literal["passed", "failed", "not applicable", "not run"]
    passed: bool
    findings: int
    codes: list[str] = Field(default_factory=list)
    examined: str | None = None
    count: int = 0
    items: list[str] = Field(default_factory=list)
    reason: str | None = None


class ReleasekitBlock(Strict):
    lock_sha256: str
    manifest_sha256: str
    image_tags: list[str] = Field(default_factory=list)
    # The sha256 of the SBOM written for this image (None: none written). Signed with the summary,
    # it binds that one document to the verification: publish and promote refuse any other.
    sbom_sha256: str | None = None
    checks: list[CheckOutcome] = Field(default_factory=list)
    findings: FindingList = Field(default_factory=list)


class VerificationSummary(Record):
    """The VSA v1 predicate (with releasekit's own block)."""

    kind = "verification summary predicate"

    schema_: Literal["releasekit.verification-summary/v1"] = Field(
        default=VERIFICATION_SCHEMA, alias="schema"
    )
    verifier: Verifier = Field(default_factory=Verifier)
    time_verified: str = Field(alias="timeVerified")
    resource_uri: str = Field(alias="resourceUri")
    policy: ResourceDescriptor
    attestations: list[ResourceDescriptor] = Field(default_factory=list, alias="inputAttestations")
    verification_result: Literal["PASSED", "FAILED"] = Field(alias="verificationResult")
    verified_levels: list[str] = Field(alias="verifiedLevels")
    slsa_version: str = Field(default=SLSA_VERSION, alias="slsaVersion")
    releasekit: ReleasekitBlock

    # What the publish gate asks of a summary.
    @property
    def result(self) -> str:
        return self.verification_result

    @property
    def lock_sha256(self) -> str:
        return self.releasekit.lock_sha256

    @property
    def unproven_checks(self) -> list[str]:
        """Checks that failed or were not run, as ``name (status)``: a PASSED summary has none."""
        return [f"{c.name} ({c.status})" for c in self.releasekit.checks if c.status in ("failed", "not run")]

    @property
    def sbom_sha256(self) -> str | None:
        return self.releasekit.sbom_sha256

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
        return self.resource_uri.endswith(image_id)


class VerificationStatement(Record):
    """The file: an in-toto Statement v1 about the image, its predicate the VSA v1 summary."""

    schema_field: ClassVar[str] = "_type"
    kind = "verification summary"

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor] = Field(min_length=1)
    predicate_type: Literal["https://slsa.dev/verification_summary/v1"] = Field(
        default=VERIFICATION_SUMMARY_TYPE, alias="predicateType"
    )
    predicate: VerificationSummary

    @classmethod
    def about(cls, summary: VerificationSummary, *, name: str | None = None) -> VerificationStatement:
        """The statement whose subject is the image the summary verified (``resourceUri``, an image ID)."""
        image_id = summary.resource_uri
        return cls(
            subject=[
                ResourceDescriptor(name=name or image_id, digest={"sha256": image_id.removeprefix("sha256:")})
            ],
            predicate=summary,
        )

    @property
    def summary(self) -> VerificationSummary:
        return self.predicate

    def subject_sha256(self) -> list[str]:
        return [s.digest["sha256"] for s in self.subject if "sha256" in s.digest]

    def names_image(self, image_id: str) -> bool:
        """The image is a subject of the statement and the summary's ``resourceUri``."""
        return image_id.removeprefix("sha256:") in self.subject_sha256() and self.predicate.names_image(
            image_id
        )
