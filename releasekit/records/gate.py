"""``gate.json``: what the publish gate applied and found, attached to the published digest.

``publish`` writes it into the image's attachments (``attachments.py``); ``promote`` reads it
back and applies the same policy again. It holds the policy (the manifest's cells, suites,
hygiene and forbidden switches), the image ID, the lock's sha256, the manifest's sha256 and
the whole gate report (every check's findings and the receipts it accepted).

Schema ``releasekit.gate/v1``. Files attached before the schema field existed (same fields,
no ``schema``) are read as v1: ``read_gate`` says so in one place.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, Field

from releasekit.findings import Findings
from releasekit.records.base import Record, RecordError, bounded_json, dump_record, parse_record
from releasekit.records.legacy import Headline, legacy_receipt_facts
from releasekit.records.receipt import RECEIPT_SCHEMA, Receipt

GATE_FILE: Final = "gate.json"
GATE_SCHEMA: Final = "releasekit.gate/v1"


class CellPolicy(BaseModel):
    id: str
    sha256: str | None = None  # of the cell's canonical JSON: a receipt proves exactly this definition
    required: bool = True
    # The engine whose adapter says which flags only place the server (the manifest's default engine).
    engine: str = "vllm"
    env: dict[str, str] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)


class SuitePolicy(BaseModel):
    """A component's test suite (manifest ``tests:``): required suites need a passed receipt."""

    component: str
    suite: str
    required: bool = True
    gpus: int = 0  # what the suite needs: said in a refusal, so the reader knows where to run it
    expect: list[str] = Field(default_factory=list)  # the plan's stated counts ("passed >= 366")

    @property
    def key(self) -> str:
        return f"{self.component}/{self.suite}"


class HygienePolicy(BaseModel):
    """A component's hygiene (manifest ``hygiene:``): required components need every step passed."""

    component: str
    steps: list[str] = Field(default_factory=list)
    required: bool = True


class GatePolicy(BaseModel):
    """What the manifest asks of a release: its cells, suites, hygiene and the switches it forbids."""

    cells: list[CellPolicy] = Field(default_factory=list)
    suites: list[SuitePolicy] = Field(default_factory=list)
    hygiene: list[HygienePolicy] = Field(default_factory=list)
    forbidden_env: list[str] = Field(default_factory=list)
    forbidden_args: list[str] = Field(default_factory=list)
    forbidden_reason: str | None = None
    signed: bool = False  # publish.signed: the evidence must carry signatures by a trusted key
    # publish.require_reproduced: the channels a promotion into which needs a signed, independent
    # reproduction (the manifest's stable channels; empty: none). Recorded so that a promote without
    # --manifest (which alone names whose reproduction counts) refuses instead of requiring nothing.
    reproduced_channels: list[str] = Field(default_factory=list)

    def cell(self, cell_id: str) -> CellPolicy | None:
        return next((c for c in self.cells if c.id == cell_id), None)


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
    image_digest: str | None = None  # the registry digest it pulled (staged candidates)
    lock_sha256: str | None
    passed: bool
    # What the server ran with: read by the gate, left out of reports (an env may hold a token).
    env: dict[str, str] = Field(default_factory=dict, exclude=True)
    args: list[str] = Field(default_factory=list, exclude=True)
    metrics: list[Headline] = Field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any, path: str, sha256: str) -> ReceiptView:
        """Raises ``ValueError`` (one line) when the data is no receipt."""
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        if data.get("schema") == RECEIPT_SCHEMA:
            return cls._from_v1(Receipt.from_json(data, path), path, sha256)
        if "schema" in data:
            raise ValueError(f"unknown receipt schema {data['schema']!r}")
        facts = legacy_receipt_facts(data)  # today's tool's files are read in records/legacy.py only
        return cls(path=path, sha256=sha256, **facts.model_dump())

    @classmethod
    def _from_v1(cls, receipt: Receipt, path: str, sha256: str) -> ReceiptView:
        headlines = [
            Headline(name=g.metric, value=g.candidate, baseline=g.baseline_value, passed=g.passed)
            for g in receipt.gates
        ]
        gated = {g.metric for g in receipt.gates}
        headlines += [
            Headline(name=name, value=m.value, unit=m.unit)
            for name, m in receipt.metrics.items()
            if name not in gated
        ]
        invocation = receipt.invocation
        return cls(
            path=path,
            sha256=sha256,
            cell=receipt.cell_id,
            cell_sha256=receipt.cell_sha256,
            image_id=receipt.image_id,
            image_digest=receipt.image_digest,
            lock_sha256=receipt.lock_sha256,
            passed=receipt.passed and receipt.status == "passed",
            env=dict(invocation.env) if invocation else {},
            args=list(invocation.argv) if invocation else [],
            metrics=headlines,
        )


class CheckResult(BaseModel):
    name: str
    passed: bool
    findings: Findings


class GateReport(BaseModel):
    image_id: str
    lock_sha256: str
    passed: bool
    checks: list[CheckResult]
    findings: Findings
    receipts: list[ReceiptView] = Field(default_factory=list)


class GateRecord(Record):
    """gate.json in the attachments: what the gate applied, so promote can apply it again."""

    kind = "gate record"

    schema_: Literal["releasekit.gate/v1"] = Field(default=GATE_SCHEMA, alias="schema")
    image_id: str
    lock_sha256: str
    manifest_sha256: str | None
    policy: GatePolicy
    report: GateReport


def gate_text(record: GateRecord) -> str:
    return dump_record(record)


def read_gate(text: str | None, source: str = GATE_FILE) -> GateRecord:
    """gate.json's text; a file from before the schema field (no ``schema``) is read as v1.

    Raises :class:`RecordError` (a ``ValueError``, one line) when it is absent or not a gate record.
    """
    if text is None:
        raise RecordError(f"{source}: not attached")
    try:
        data = bounded_json(text, source)
    except ValueError as exc:
        raise RecordError(f"{source}: not JSON ({exc})") from None
    if isinstance(data, dict) and "schema" not in data:
        data = {**data, "schema": GATE_SCHEMA}
    return parse_record(GateRecord, data, source)
