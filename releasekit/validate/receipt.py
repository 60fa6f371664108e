"""The receipt: what one validation cell measured, bound to the image, the lock and the cell.

One JSON file per cell under ``RECEIPTS_DIR/<cell-id>.json``. Publish reads these files
(never our internals), so the schema is versioned and strict, and additive only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from releasekit.errors import InputError
from releasekit.findings import Finding
from releasekit.manifest.validation import Cell

RECEIPT_SCHEMA = "releasekit.receipt/v1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Metric(_Strict):
    """One measured quantity. ``samples`` holds every run's value when the check was repeated."""

    name: str
    value: float | None
    unit: str
    samples: list[float] = Field(default_factory=list)
    low: float | None = Field(default=None, description="lower 95 % bound (Wilson or t-interval)")
    high: float | None = None


class CheckResult(_Strict):
    name: str
    kind: str
    passed: bool
    required: bool = True
    metrics: list[Metric] = Field(default_factory=list)
    details: dict[str, object] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    duration_s: float = 0.0


class GateResult(_Strict):
    metric: str
    passed: bool
    candidate: float | None = None
    candidate_low: float | None = None
    candidate_high: float | None = None
    runs: int = 1
    baseline: str | None = None
    baseline_value: float | None = None
    ratio_low: float | None = None
    ratio: float | None = None
    bound: str = Field(description="the rule applied, for a person")
    note: str | None = None


class Invocation(_Strict):
    """Exactly what was run: nothing may influence the server that is not written here."""

    engine: str
    argv: list[str]
    env: dict[str, str] = Field(description="the container's effective environment: image ENV plus the cell's")
    image_env: dict[str, str] = Field(default_factory=dict)
    cell_env: dict[str, str] = Field(default_factory=dict)
    gpus: list[int] = Field(default_factory=list)
    mounts: dict[str, str] = Field(default_factory=dict, description="container path -> what it holds")


class Receipt(_Strict):
    schema_: Literal["releasekit.receipt/v1"] = Field(default=RECEIPT_SCHEMA, alias="schema")
    cell_id: str
    cell: Cell
    cell_sha256: str = Field(description="sha256 of the cell's canonical JSON: which matrix entry this proves")
    image: str
    image_id: str
    lock_sha256: str | None
    manifest_sha256: str
    manifest_name: str
    passed: bool
    status: Literal["passed", "failed", "error"]
    started_at: str
    finished_at: str
    duration_s: float
    startup_s: float | None = None
    invocation: Invocation | None = None
    metrics: dict[str, Metric] = Field(default_factory=dict)
    checks: list[CheckResult] = Field(default_factory=list)
    gates: list[GateResult] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    log_tail: list[str] = Field(default_factory=list)
    host: dict[str, str] = Field(default_factory=dict)
    # Which engine adapter (releasekit.validate.engines) judged this cell, and its version.
    engine_adapter: str | None = None
    engine_adapter_version: str | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def cell_sha256(cell: Cell) -> str:
    import hashlib

    canonical = json.dumps(cell.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def write_receipt(receipt: Receipt, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{receipt.cell_id}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(receipt.model_dump(mode="json", by_alias=True), indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


def read_receipt(path: Path) -> Receipt:
    try:
        return Receipt.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{path}: no such receipt") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{path}: not a {RECEIPT_SCHEMA} receipt: {where}: {first['msg']}") from None


def read_receipts(directory: Path) -> list[Receipt]:
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory of receipts")
    return [read_receipt(p) for p in sorted(directory.glob("*.json"))]
