"""The files the publish gate reads, and how it reads them.

The contract with the earlier stages (see docs/publish.md):

``--evidence DIR`` holds
  * ``plan-check.json``  what ``releasekit plan check --json`` printed for this lock: a
    ``releasekit.plan-check/v1`` record (``releasekit.records.plan_check``);
  * ``verification_summary.json``  the ``releasekit.verification-summary/v1`` record that
    ``verify-provenance`` wrote (``releasekit.records.verification``), bare or wrapped in an
    in-toto Statement;
  * ``provenance.intoto.json``  the provenance statement of the build (attached as is);
  * ``RELEASE.md``  (optional) the build's release notes, folded into the published notes.

``--receipts DIR`` holds one JSON receipt per validation cell (any ``*.json`` file there).

The test stage's records sit in the evidence directory too (``releasekit test`` and
``releasekit hygiene`` write them there): ``tests/<component>.<suite>.json``
(``releasekit.records.test_receipt.TestReceipt``) and ``hygiene.json``
(``HygieneReceipt``). Both are optional for a manifest without ``tests:``/``hygiene:``.

Unreadable files do not crash the gate: they become "missing" for the check that needs
them, with the reason in the finding's message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from releasekit.records.legacy import legacy_receipt_facts
from releasekit.records.plan_check import PlanCheckResult
from releasekit.records.receipt import RECEIPT_SCHEMA, Receipt
from releasekit.records.verification import VerificationSummary

__all__ = [
    "Evidence",
    "LoadedJson",
    "PlanCheckEvidence",
    "ReceiptView",
    "VerificationSummary",
    "load_evidence",
]

PLAN_CHECK_FILE = "plan-check.json"
VERIFICATION_SUMMARY_FILE = "verification_summary.json"
PROVENANCE_FILE = "provenance.intoto.json"
BUILD_NOTES_FILE = "RELEASE.md"
TESTS_DIR = "tests"
HYGIENE_FILE = "hygiene.json"


class LoadedJson(BaseModel):
    """A JSON file read for the gate: the data, or why it could not be read."""

    path: str
    data: Any = None
    problem: str | None = None
    sha256: str | None = None
    # The file's exact text: attached as is, so digests other stages recorded still match.
    text: str | None = Field(default=None, exclude=True, repr=False)

    @property
    def ok(self) -> bool:
        return self.problem is None


def read_json(path: Path) -> LoadedJson:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return LoadedJson(path=str(path), problem="file not found")
    except OSError as exc:
        return LoadedJson(path=str(path), problem=f"cannot read: {exc.strerror or exc}")
    return parse_json(str(path), raw)


def parse_json(name: str, raw: bytes) -> LoadedJson:
    import hashlib

    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return LoadedJson(path=name, problem=f"not valid JSON: {exc}")
    return LoadedJson(path=name, data=data, sha256=hashlib.sha256(raw).hexdigest(), text=text)


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


class ReceiptView(BaseModel):
    """What the gate reads from a validation receipt, whatever else the receipt holds.

    A ``releasekit.receipt/v1`` receipt is validated strictly against its record
    (``releasekit.records.receipt.Receipt``); a receipt of today's tool (``status:
    qualified``, no schema) is read for the few facts the gate needs, so old releases can
    be checked too.
    """

    path: str
    sha256: str
    cell: str | None
    cell_sha256: str | None = None
    image_id: str | None
    lock_sha256: str | None
    passed: bool
    # What the server ran with: read by the gate, left out of reports (an env may hold a token).
    env: dict[str, str] = Field(default_factory=dict, exclude=True)
    args: list[str] = Field(default_factory=list, exclude=True)
    metrics: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def from_loaded(cls, loaded: LoadedJson) -> ReceiptView:
        data = loaded.data
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        if data.get("schema") == RECEIPT_SCHEMA:
            return cls._from_v1(loaded)
        if "schema" in data:
            raise ValueError(f"unknown receipt schema {data['schema']!r}")
        return cls._from_legacy(loaded)

    @classmethod
    def _from_v1(cls, loaded: LoadedJson) -> ReceiptView:
        receipt = Receipt.from_json(loaded.data, loaded.path)
        headlines: list[dict[str, Any]] = [
            {"name": g.metric, "value": g.candidate, "baseline": g.baseline_value, "passed": g.passed}
            for g in receipt.gates
        ]
        gated = {g.metric for g in receipt.gates}
        headlines += [
            {"name": name, "value": m.value, "unit": m.unit}
            for name, m in receipt.metrics.items()
            if name not in gated
        ]
        invocation = receipt.invocation
        return cls(
            path=loaded.path,
            sha256=loaded.sha256 or "",
            cell=receipt.cell_id,
            cell_sha256=receipt.cell_sha256,
            image_id=receipt.image_id,
            lock_sha256=receipt.lock_sha256,
            passed=receipt.passed and receipt.status == "passed",
            env=dict(invocation.env) if invocation else {},
            args=list(invocation.argv) if invocation else [],
            metrics=headlines,
        )

    @classmethod
    def _from_legacy(cls, loaded: LoadedJson) -> ReceiptView:
        facts = legacy_receipt_facts(loaded.data)  # today's tool's files are read in records/legacy.py only
        return cls(path=loaded.path, sha256=loaded.sha256 or "", **facts.model_dump())


class Evidence(BaseModel):
    """Everything the gate looks at besides the image and the policy."""

    plan_check: LoadedJson
    verification_summary: LoadedJson
    provenance: LoadedJson
    build_notes: str | None = None
    receipts: list[LoadedJson] = Field(default_factory=list)
    # The test stage's records (tests/*.json, hygiene.json): read by the gate's test and hygiene rules.
    test_receipts: list[LoadedJson] = Field(default_factory=list)
    hygiene: LoadedJson | None = None


def load_evidence(evidence_dir: Path, receipts_dir: Path) -> Evidence:
    notes_path = evidence_dir / BUILD_NOTES_FILE
    receipts = (
        [read_json(p) for p in sorted(receipts_dir.glob("*.json")) if p.is_file()]
        if receipts_dir.is_dir()
        else []
    )
    return Evidence(
        plan_check=read_json(evidence_dir / PLAN_CHECK_FILE),
        verification_summary=read_json(evidence_dir / VERIFICATION_SUMMARY_FILE),
        provenance=read_json(evidence_dir / PROVENANCE_FILE),
        build_notes=notes_path.read_text(encoding="utf-8") if notes_path.is_file() else None,
        receipts=receipts,
        test_receipts=[
            read_json(p) for p in sorted((evidence_dir / TESTS_DIR).glob("*.json")) if p.is_file()
        ],
        hygiene=read_json(evidence_dir / HYGIENE_FILE) if (evidence_dir / HYGIENE_FILE).exists() else None,
    )
