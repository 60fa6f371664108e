"""One check = one small object with the shape of every releasekit check.

A cell check has a ``name``, the ``codes`` it may report and ``run(ctx) -> Findings``
(``releasekit.checks.Check`` over a ``CheckContext``). What it measures (metrics with
units, details) it records in ``ctx.record``; ``run_check`` gives each check a fresh
record and turns findings and record into the receipt's ``CheckResult``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from releasekit.findings import Findings
from releasekit.manifest.validation import Cell, ValidationSpec
from releasekit.records.receipt import CheckResult, Metric
from releasekit.validate.client import EngineClient
from releasekit.validate.engines.interface import Engine


@dataclass
class Measurements:
    """Where a check records what it measured (for the receipt), next to its findings."""

    metrics: list[Metric] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)


@dataclass
class CheckContext:
    cell: Cell
    spec: ValidationSpec
    manifest_dir: Path
    client: EngineClient | None
    engine: Engine  # the adapter that started the server: its metric names and log patterns
    metrics_path: str = "/metrics"
    # The server log so far; a function because it grows while the checks run.
    read_log: Callable[[], str] = lambda: ""
    seed: int = 0
    # Values one check leaves for a later one (e.g. the acceptance measured earlier).
    notes: dict[str, object] = field(default_factory=dict)
    # The running check's measurements; ``run_check`` gives each check its own.
    record: Measurements = field(default_factory=Measurements)
    # argv run inside the server's container, with a time limit: (exit code, output). None when
    # the cell has no single server container (a prefill/decode topology).
    run_in_server: Callable[[list[str], float], tuple[int, str]] | None = None
    server_port: int | None = None  # where the server listens inside its container
    model_path: str | None = None  # the model as the server was given it (inside the container)


class CellCheck(ABC):
    kind: ClassVar[str]
    codes: ClassVar[tuple[str, ...]]

    def __init__(self, config: Any) -> None:  # the matching manifest check model
        self.config = config

    @property
    def name(self) -> str:
        return self.kind

    def run(self, ctx: CheckContext) -> Findings:
        findings = Findings()
        metrics, details = self.measure(ctx, findings)
        ctx.record.metrics.extend(metrics)
        ctx.record.details.update(details)
        for f in findings:
            f.location.cell = ctx.cell.id
        return findings

    def preflight(self, ctx: CheckContext) -> Findings:
        """What can be judged before the server starts (``ctx.client`` is None); nothing by default."""
        return Findings()

    @abstractmethod
    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        """Talk to the server, add findings for what failed, return metrics (with units) and details."""


def run_check(check: CellCheck, ctx: CheckContext) -> CheckResult:
    """Run one check with a fresh record; its findings, metrics and details make one CheckResult."""
    own = replace(ctx, record=Measurements())
    start = time.monotonic()
    findings = check.run(own)
    return CheckResult(
        name=check.name,
        kind=check.kind,
        passed=findings.passed,
        required=check.config.required,
        metrics=own.record.metrics,
        details=own.record.details,
        findings=list(findings),
        duration_s=round(time.monotonic() - start, 3),
    )


def metric(kind: str, name: str, value: float | None, unit: str, **extra: Any) -> Metric:
    return Metric(name=f"{kind}.{name}", value=value, unit=unit, **extra)
