"""One check = one small object: a name, its manifest settings in, a CheckResult out."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from releasekit.findings import Findings
from releasekit.manifest.validation import Cell, ValidationSpec
from releasekit.records.receipt import CheckResult, Metric
from releasekit.validate.client import EngineClient


@dataclass
class CheckContext:
    cell: Cell
    spec: ValidationSpec
    manifest_dir: Path
    client: EngineClient | None
    metrics_path: str = "/metrics"
    # The server log so far; a function because it grows while the checks run.
    read_log: Callable[[], str] = lambda: ""
    seed: int = 0
    # Values one check leaves for a later one (e.g. the acceptance measured earlier).
    notes: dict[str, object] = field(default_factory=dict)


class CellCheck(ABC):
    kind: ClassVar[str]

    def __init__(self, config) -> None:  # the matching manifest check model
        self.config = config

    @property
    def name(self) -> str:
        return self.kind

    def run(self, ctx: CheckContext) -> CheckResult:
        findings = Findings()
        start = time.monotonic()
        metrics, details = self.measure(ctx, findings)
        for f in findings:
            f.location.cell = ctx.cell.id
        return CheckResult(
            name=self.name,
            kind=self.kind,
            passed=findings.passed,
            required=self.config.required,
            metrics=metrics,
            details=details,
            findings=list(findings),
            duration_s=round(time.monotonic() - start, 3),
        )

    @abstractmethod
    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        """Talk to the server, add findings for what failed, return metrics (with units) and details."""


def metric(kind: str, name: str, value: float | None, unit: str, **extra: object) -> Metric:
    return Metric(name=f"{kind}.{name}", value=value, unit=unit, **extra)
