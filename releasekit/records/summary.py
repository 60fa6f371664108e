"""``summary.json``: ``validate aggregate``'s summary of the receipts (and the test stage's receipts) of one image.

Written beside ``REPORT.md`` and the plots by ``releasekit.validate.report``; one row per cell
(``CellRow``) and per test suite (``SuiteRow``), the findings across them (mixed images or
locks, missing cells) and the files written. Schema ``releasekit.validation-summary/v1``;
written through ``write_record`` (sorted keys).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, Field

from releasekit.findings import Finding
from releasekit.records.base import Record, load_record

SUMMARY_FILE: Final = "summary.json"
AGGREGATE_SCHEMA: Final = "releasekit.validation-summary/v1"


class CellRow(BaseModel):
    cell_id: str
    status: str
    passed: bool
    required: bool
    speculative: str
    gpus: int
    duration_s: float
    headline: dict[str, float | None] = Field(default_factory=dict)
    codes: list[str] = Field(default_factory=list)


class SuiteRow(BaseModel):
    """A component test suite (``releasekit test``) of the same image: its counts next to the plan's stated counts."""

    component: str
    suite: str
    status: str
    required: bool
    counts: str
    stated: str  # the plan's count rules with the actual numbers ("passed >= 366: 366 ok"), "-" when none
    accepted: str  # failures accepted as pre-existing/flaky/allowlisted
    skip_reason: str | None = None


class Aggregate(Record):
    """summary.json: one row per cell and per test suite, and the findings across them."""

    kind = "validation summary"

    schema_: Literal["releasekit.validation-summary/v1"] = Field(default=AGGREGATE_SCHEMA, alias="schema")
    image_id: str | None
    lock_sha256: str | None
    manifest_sha256: str | None
    cells: list[CellRow]
    suites: list[SuiteRow] = Field(default_factory=list)
    passed: bool
    findings: list[Finding] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)


def read_summary(path: Path) -> Aggregate:
    return load_record(Aggregate, path)
