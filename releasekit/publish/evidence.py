"""The files the publish gate reads, and how it reads them.

The contract with the earlier stages (see docs/publish.md):

``--evidence DIR`` holds
  * ``plan-check.json``  what ``releasekit plan check --json`` printed for this lock: a
    ``releasekit.plan-check/v1`` record (``releasekit.records.plan_check``);
  * ``verification_summary.json``  the in-toto Statement (SLSA VSA v1 predicate) that
    ``verify-provenance`` wrote (``releasekit.records.verification.VerificationStatement``);
    a bare predicate is refused;
  * ``provenance.intoto.json``  the provenance statement of the build (attached as is);
  * ``RELEASE.md``  (optional) the build's release notes, folded into the published notes;
  * ``sbom.cdx.json``  (optional) the CycloneDX SBOM ``verify-provenance`` wrote for the image it
    verified (``releasekit.records.sbom``): attached as is, and checked to name the image.

``--receipts DIR`` holds one JSON receipt per validation cell (any ``*.json`` file there but the
signature envelopes, ``*.dsse.json``, which ``signatures.py`` reads).

The test stage's records sit in the evidence directory too (``releasekit test`` and
``releasekit hygiene`` write them there): ``tests/<component>.<suite>.json``
(``releasekit.records.test_receipt.TestReceipt``) and ``hygiene.json``
(``HygieneReceipt``). Both are optional for a manifest without ``tests:``/``hygiene:``.

Each file is read once, into its record (``releasekit.records.evidence.EvidenceFile``).
Unreadable files do not crash the gate: they become "missing" (or "invalid") for the check
that needs them, with the reason in the finding's message.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from releasekit.bounded_read import TEXT_MAX_BYTES, read_bounded
from releasekit.records.build import RELEASE_NOTES_FILE
from releasekit.records.dsse import ENVELOPE_SUFFIX
from releasekit.records.evidence import EvidenceFile, Parser, missing, parse_evidence, read_evidence
from releasekit.records.gate import ReceiptView
from releasekit.records.intoto import StatementSubjects
from releasekit.records.plan_check import PLAN_CHECK_FILE, PlanCheckResult
from releasekit.records.provenance import PROVENANCE_FILE
from releasekit.records.sbom import SBOM_FILE, SbomView
from releasekit.records.test_receipt import HYGIENE_FILE, TESTS_DIR, HygieneReceipt, TestReceipt
from releasekit.records.verification import (
    VERIFICATION_SUMMARY_FILE,
    VerificationStatement,
    VerificationSummary,
)

__all__ = [
    "HYGIENE_FILE",
    "PLAN_CHECK_FILE",
    "PROVENANCE_FILE",
    "RELEASE_NOTES_FILE",
    "TESTS_DIR",
    "VERIFICATION_SUMMARY_FILE",
    "Evidence",
    "PlanCheckEvidence",
    "ReceiptView",
    "VerificationStatement",
    "VerificationSummary",
    "evidence_from",
    "load_evidence",
    "missing",
    "parse_evidence",
]


class PlanCheckEvidence(BaseModel):
    """What the gate concludes from a plan-check record."""

    passed: bool
    lock_sha256: str | None
    error_codes: list[str] = Field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any) -> PlanCheckEvidence:
        """Raises ``ValueError`` (one line) when the data is not a plan-check record."""
        result = PlanCheckResult.from_json(data, PLAN_CHECK_FILE)
        errors = result.error_codes()
        # A file that says "passed" while listing errors is not trusted.
        return cls(passed=result.passed and not errors, lock_sha256=result.lock_sha256, error_codes=errors)


def _plan_check(data: Any, _name: str, _sha: str) -> PlanCheckEvidence:
    return PlanCheckEvidence.from_json(data)


def _summary(data: Any, _name: str, _sha: str) -> VerificationStatement:
    return VerificationStatement.from_json(data, VERIFICATION_SUMMARY_FILE)


def _subjects(data: Any, _name: str, _sha: str) -> StatementSubjects:
    return StatementSubjects.from_json(data)


def _sbom(data: Any, name: str, _sha: str) -> SbomView:
    return SbomView.from_json(data, name)


def _test_receipt(data: Any, name: str, _sha: str) -> TestReceipt:
    return TestReceipt.from_json(data, name)


def _hygiene(data: Any, name: str, _sha: str) -> HygieneReceipt:
    return HygieneReceipt.from_json(data, name)


RECEIPT_PARSER: Parser[ReceiptView] = ReceiptView.from_json
TEST_RECEIPT_PARSER: Parser[TestReceipt] = _test_receipt


class Evidence(BaseModel):
    """Everything the gate looks at besides the image and the policy, each file read into its record."""

    plan_check: EvidenceFile[PlanCheckEvidence]
    verification_summary: EvidenceFile[VerificationStatement]
    provenance: EvidenceFile[StatementSubjects]
    build_notes: str | None = None
    receipts: list[EvidenceFile[ReceiptView]] = Field(default_factory=list)
    # The test stage's records (tests/*.json, hygiene.json): read by the gate's test and hygiene rules.
    test_receipts: list[EvidenceFile[TestReceipt]] = Field(default_factory=list)
    hygiene: EvidenceFile[HygieneReceipt] | None = None
    # The CycloneDX SBOM of the verified image (None: the release directory has none).
    sbom: EvidenceFile[SbomView] | None = None

    def sbom_text(self) -> str | None:
        """The SBOM's exact text (None: there is none, or it could not be read: the gate's finding)."""
        return self.sbom.text if self.sbom is not None and self.sbom.ok else None

    def sbom_named(self) -> str | None:
        """The sha256 of the SBOM the verification summary names (None: it names none, or is unreadable)."""
        statement = self.verification_summary.record
        return statement.summary.sbom_sha256 if statement is not None else None

    def texts(self) -> list[str]:
        """The exact text of every evidence file that was read (for the secret scan)."""
        files: list[EvidenceFile[Any]] = [
            self.plan_check,
            self.verification_summary,
            self.provenance,
            *self.receipts,
            *self.test_receipts,
            *([self.hygiene] if self.hygiene else []),
            *([self.sbom] if self.sbom else []),
        ]
        return [self.build_notes or "", *(f.text or "" for f in files)]


def evidence_from(
    read: Callable[[str, Parser[Any]], EvidenceFile[Any]],
    receipts: list[EvidenceFile[ReceiptView]],
    test_receipts: list[EvidenceFile[TestReceipt]],
    *,
    build_notes: str | None,
    has_hygiene: bool,
    has_sbom: bool = False,
) -> Evidence:
    """The evidence, each named file read by ``read(name, parser)`` (from a directory or the registry)."""
    return Evidence(
        plan_check=read(PLAN_CHECK_FILE, _plan_check),
        verification_summary=read(VERIFICATION_SUMMARY_FILE, _summary),
        provenance=read(PROVENANCE_FILE, _subjects),
        build_notes=build_notes,
        receipts=receipts,
        test_receipts=test_receipts,
        hygiene=read(HYGIENE_FILE, _hygiene) if has_hygiene else None,
        sbom=read(SBOM_FILE, _sbom) if has_sbom else None,
    )


def _notes(path: Path, evidence_dir: Path) -> str | None:
    """RELEASE.md as the build wrote it (a FIFO, a link out or an oversized one: exit 2, ``bounded_read``)."""
    if not os.path.lexists(path):
        return None
    return read_bounded(path, TEXT_MAX_BYTES, within=evidence_dir).decode("utf-8", errors="replace")


def _record_file(path: Path) -> bool:
    """A receipt file; the signature envelopes beside them (``*.dsse.json``) are read by ``signatures``."""
    return not path.name.endswith(ENVELOPE_SUFFIX) and path.is_file()


def load_evidence(evidence_dir: Path, receipts_dir: Path) -> Evidence:
    notes_path = evidence_dir / RELEASE_NOTES_FILE
    receipts = (
        [read_evidence(p, RECEIPT_PARSER) for p in sorted(receipts_dir.glob("*.json")) if _record_file(p)]
        if receipts_dir.is_dir()
        else []
    )
    tests = [
        read_evidence(p, TEST_RECEIPT_PARSER)
        for p in sorted((evidence_dir / TESTS_DIR).glob("*.json"))
        if _record_file(p)
    ]
    return evidence_from(
        lambda name, parse: read_evidence(evidence_dir / name, parse),
        receipts,
        tests,
        build_notes=_notes(notes_path, evidence_dir),
        has_hygiene=(evidence_dir / HYGIENE_FILE).exists(),
        has_sbom=(evidence_dir / SBOM_FILE).exists(),
    )
