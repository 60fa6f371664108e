"""Records of the test stage: ``tests/<component>.<suite>.json`` and ``hygiene.json``.

Written by ``releasekit test`` / ``releasekit hygiene`` and read by whoever gates on them
(the publish gate, the report). A file whose fields do not match is a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from releasekit.errors import InputError
from releasekit.findings import Findings

TEST_RECEIPT_SCHEMA = "releasekit/test-receipt/v1"
HYGIENE_SCHEMA = "releasekit/hygiene/v1"

Outcome = Literal["passed", "failed", "error", "skipped", "missing"]
Verdict = Literal["regression", "pre-existing", "flaky", "allowlisted", "unjudged"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Counts(_Record):
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped + self.errors

    def get(self, key: str) -> int:
        return self.total if key == "total" else int(getattr(self, key))


class RunEvidence(_Record):
    """One run of one test: where (image), how it ended, and what it printed."""

    image_id: str
    outcome: Outcome
    message: str | None = None
    output: str | None = None


class FailedTest(_Record):
    test: str  # pytest node id (or classname::name for command suites)
    outcome: Literal["failed", "error"]
    message: str | None = None
    output: str | None = None
    verdict: Verdict
    candidate_rerun: RunEvidence | None = None
    baseline: RunEvidence | None = None
    allowlist_reason: str | None = None


class CountRuleResult(_Record):
    rule: str
    actual: int
    ok: bool


class SuiteRun(_Record):
    """How the suite's container ended."""

    exit_code: int | None = None
    timed_out: bool = False
    report_found: bool = False
    seconds: float = 0.0
    log_tail: str = ""


class TestReceipt(_Record):
    __test__ = False

    schema_version: Literal["releasekit/test-receipt/v1"] = "releasekit/test-receipt/v1"
    component: str
    suite: str
    required: bool = True
    status: Literal["passed", "failed", "skipped", "timed-out"]
    skip_reason: str | None = None
    image: str
    image_id: str | None = None
    lock_sha256: str | None = None
    source_commit: str | None = None
    baseline_image: str | None = None
    baseline_image_id: str | None = None
    command: list[str] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    skip_reasons: dict[str, int] = Field(default_factory=dict)
    expected: list[CountRuleResult] = Field(default_factory=list)
    failures: list[FailedTest] = Field(default_factory=list)
    run: SuiteRun = Field(default_factory=SuiteRun)
    started_at: str
    duration_s: float = 0.0
    findings: Findings = Field(default_factory=Findings)


class HygieneStepResult(_Record):
    step: str
    tool: str | None = None
    version: str | None = None
    status: Literal["passed", "failed", "not-runnable", "skipped"]
    files: int = 0
    detail: str | None = None


class HygieneComponent(_Record):
    component: str
    repo: str
    base: str
    composed_commit: str
    composed_tree: str
    scope: Literal["changed", "all"]
    files: list[str] = Field(default_factory=list)
    steps: list[HygieneStepResult] = Field(default_factory=list)


class HygieneReceipt(_Record):
    schema_version: Literal["releasekit/hygiene/v1"] = "releasekit/hygiene/v1"
    status: Literal["passed", "failed", "incomplete"]
    lock_sha256: str
    components: list[HygieneComponent] = Field(default_factory=list)
    findings: Findings = Field(default_factory=Findings)


def write_record(record: BaseModel, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _read(model: type[BaseModel], path: Path) -> BaseModel:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{path}: not a {model.__name__} record at {loc or '(top)'}: {err['msg']}") from None


def read_test_receipt(path: Path) -> TestReceipt:
    record = _read(TestReceipt, path)
    assert isinstance(record, TestReceipt)
    return record


def read_hygiene_receipt(path: Path) -> HygieneReceipt:
    record = _read(HygieneReceipt, path)
    assert isinstance(record, HygieneReceipt)
    return record
