"""Startup and graph-capture log scan: patterns that must not, or must, appear in the server log."""

from __future__ import annotations

import re

from releasekit.findings import Findings
from releasekit.manifest.validation import LogScanCheck
from releasekit.records.receipt import Metric
from releasekit.validate.checks.interface import CellCheck, CheckContext, metric


def scan(log: str, forbid: list[str], require: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(forbidden pattern, first offending line) pairs, and the required patterns that never matched."""
    lines = log.splitlines()
    hits: list[tuple[str, str]] = []
    for pattern in forbid:
        rx = re.compile(pattern)
        line = next((ln for ln in lines if rx.search(ln)), None)
        if line is not None:
            hits.append((pattern, line.strip()[:300]))
    missing = [p for p in require if not re.search(p, log, re.MULTILINE)]
    return hits, missing


class LogScan(CellCheck):
    kind = "log_scan"
    codes = ("LOG_ERROR", "LOG_MISSING")
    config: LogScanCheck

    def measure(self, ctx: CheckContext, findings: Findings) -> tuple[list[Metric], dict[str, object]]:
        log = ctx.read_log()
        hits, missing = scan(log, self.config.forbid, self.config.require)
        for pattern, line in hits:
            findings.add("LOG_ERROR", f"server log matches /{pattern}/: {line}")
        for pattern in missing:
            findings.add("LOG_MISSING", f"server log never matches /{pattern}/")
        return [
            metric(self.kind, "forbidden_hits", len(hits), "patterns"),
            metric(self.kind, "required_missing", len(missing), "patterns"),
            metric(self.kind, "lines", len(log.splitlines()), "lines"),
        ], {"forbid": self.config.forbid, "require": self.config.require}
