"""Records of the test stage: ``tests/<component>.<suite>.json`` and ``hygiene.json``.

Written by ``releasekit test`` / ``releasekit hygiene`` and read by whoever gates on them
(the publish gate, the report). A file whose fields do not match is a one-line error.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Final, Literal

from pydantic import Field

from releasekit.findings import Findings
from releasekit.records.base import Record, Strict, load_record, write_record
from releasekit.records.dsse import ENVELOPE_SUFFIX

TESTS_DIR: Final = "tests"  # tests/<component>.<suite>.json, in the release directory
HYGIENE_FILE: Final = "hygiene.json"
TEST_RECEIPT_SCHEMA: Final = "releasekit.test-receipt/v1"
# ``tests/<component>.<suite>.dsse.json`` beside each: the testing host signs the receipt's exact bytes.
TEST_RECEIPT_PAYLOAD_TYPE: Final = "application/vnd.releasekit.test-receipt+json"
HYGIENE_SCHEMA: Final = "releasekit.hygiene/v1"

Outcome = Literal["passed", "failed", "error", "skipped", "missing"]
Verdict = Literal["regression", "pre-existing", "flaky", "allowlisted", "unjudged"]


class Counts(Strict):
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped + self.errors

    def get(self, key: str) -> int:
        return self.total if key == "total" else int(getattr(self, key))


class RunEvidence(Strict):
    """One run of one test: where (image), how it ended, and what it printed."""

    image_id: str
    outcome: Outcome
    message: str | None = None
    output: str | None = None


class FailedTest(Strict):
    test: str  # pytest node id (or classname::name for command suites)
    outcome: Literal["failed", "error"]
    message: str | None = None
    output: str | None = None
    verdict: Verdict
    candidate_rerun: RunEvidence | None = None
    baseline: RunEvidence | None = None
    allowlist_reason: str | None = None


class CountRuleResult(Strict):
    rule: str
    actual: int
    ok: bool


class SuiteRun(Strict):
    """How the suite's container ended."""

    exit_code: int | None = None
    timed_out: bool = False
    report_found: bool = False
    seconds: float = 0.0
    log_tail: str = ""


class TestReceipt(Record):
    __test__ = False
    kind: ClassVar[str] = "test receipt"

    schema_: Literal["releasekit.test-receipt/v1"] = Field(default=TEST_RECEIPT_SCHEMA, alias="schema")
    component: str
    suite: str
    required: bool = True
    status: Literal["passed", "failed", "skipped", "timed-out"]
    skip_reason: str | None = None
    image: str
    image_id: str | None = None
    image_digest: str | None = None  # the registry digest it was pulled by (--staged), None for a local image
    host: str | None = None  # the machine that ran the suite
    lock_sha256: str | None = None
    source_commit: str | None = None
    baseline_image: str | None = None
    baseline_image_id: str | None = None
    network: bool = False  # the suite's container had a network: the manifest's sandbox.network grants test
    command: list[str] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    skip_reasons: dict[str, int] = Field(default_factory=dict)
    expected: list[CountRuleResult] = Field(default_factory=list)
    failures: list[FailedTest] = Field(default_factory=list)
    run: SuiteRun = Field(default_factory=SuiteRun)
    started_at: str
    duration_s: float = 0.0
    findings: Findings = Field(default_factory=Findings)

    def counts_text(self) -> str:
        c = self.counts
        return f"{c.passed} passed, {c.failed} failed, {c.errors} errors, {c.skipped} skipped"

    def stated_text(self) -> str:
        """The plan's stated counts next to what ran: ``passed >= 366: 366 ok``; "-" when the plan states none."""
        return "; ".join(f"{r.rule}: {r.actual} {'ok' if r.ok else 'NOT MET'}" for r in self.expected) or "-"

    def accepted_text(self) -> str:
        """Failures that did not fail the suite, by verdict: ``1 pre-existing, 2 flaky``; "-" when none."""
        verdicts: dict[str, int] = {}
        for failure in self.failures:
            if failure.verdict in ("pre-existing", "flaky", "allowlisted"):
                verdicts[failure.verdict] = verdicts.get(failure.verdict, 0) + 1
        return ", ".join(f"{n} {v}" for v, n in verdicts.items()) or "-"


def read_test_receipt_dir(directory: Path) -> list[TestReceipt]:
    """Every ``*.json`` test receipt in ``directory`` (none when it does not exist); a bad file is a RecordError."""
    if not directory.is_dir():
        return []
    return [
        load_record(TestReceipt, p)
        for p in sorted(directory.glob("*.json"))
        if p.is_file() and not p.name.endswith(ENVELOPE_SUFFIX)
    ]


class HygieneStepResult(Strict):
    step: str
    tool: str | None = None
    version: str | None = None
    status: Literal["passed", "failed", "not-runnable", "skipped"]
    files: int = 0
    detail: str | None = None
    network: bool = False  # the step's sandbox had a network: the manifest's sandbox.network grants hygiene


class HygieneComponent(Strict):
    component: str
    repo: str
    base: str
    composed_commit: str
    composed_tree: str
    scope: Literal["changed", "all"]
    files: list[str] = Field(default_factory=list)
    steps: list[HygieneStepResult] = Field(default_factory=list)


class HygieneReceipt(Record):
    kind: ClassVar[str] = "hygiene receipt"

    schema_: Literal["releasekit.hygiene/v1"] = Field(default=HYGIENE_SCHEMA, alias="schema")
    status: Literal["passed", "failed", "incomplete"]
    lock_sha256: str
    components: list[HygieneComponent] = Field(default_factory=list)
    findings: Findings = Field(default_factory=Findings)


def read_test_receipt(path: Path) -> TestReceipt:
    return load_record(TestReceipt, path)


def read_hygiene_receipt(path: Path) -> HygieneReceipt:
    return load_record(HygieneReceipt, path)


__all__ = [
    "HygieneReceipt",
    "TestReceipt",
    "read_hygiene_receipt",
    "read_test_receipt",
    "read_test_receipt_dir",
    "write_record",
]
