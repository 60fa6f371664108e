"""The checks a cell can run; each manifest check kind maps to one class here."""

from __future__ import annotations

from typing import Any

from releasekit.validate.checks.acceptance import Acceptance
from releasekit.validate.checks.decode import Decode
from releasekit.validate.checks.gsm8k import Gsm8k
from releasekit.validate.checks.interface import CellCheck, CheckContext, Measurements, run_check
from releasekit.validate.checks.log_scan import LogScan
from releasekit.validate.checks.long_context import LongContext
from releasekit.validate.checks.throughput import Throughput

CHECKS: dict[str, type[CellCheck]] = {
    c.kind: c for c in (Gsm8k, Acceptance, Decode, Throughput, LongContext, LogScan)
}


def check_for(config: Any) -> CellCheck:
    return CHECKS[config.kind](config)


__all__ = ["CHECKS", "CellCheck", "CheckContext", "Measurements", "check_for", "run_check"]
