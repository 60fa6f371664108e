"""The suite ran to the end and wrote its report; a killed, silent or skipped suite says why."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.suites.context import SuiteContext


class SuiteRunCheck:
    name = "suite-run"
    codes: tuple[str, ...] = ("SUITE_TIMED_OUT", "SUITE_NO_REPORT", "SUITE_SKIPPED", "SUITE_EMPTY")

    def run(self, ctx: SuiteContext) -> Findings:
        found = Findings()
        receipt = ctx.receipt
        field = f"tests.{ctx.suite.name}"
        if receipt.status == "skipped":
            found.add(
                "SUITE_SKIPPED",
                f"suite {ctx.suite.name} not run: {receipt.skip_reason}",
                severity=Severity.warning,
                component=ctx.component,
                field=field,
            )
        elif receipt.run.timed_out:
            found.add(
                "SUITE_TIMED_OUT",
                f"suite {ctx.suite.name} was killed after its timeout of {ctx.suite.timeout:g} s",
                component=ctx.component,
                field=field,
            )
        elif not receipt.run.report_found:
            found.add(
                "SUITE_NO_REPORT",
                f"suite {ctx.suite.name} exited {receipt.run.exit_code} without test results "
                f"(log tail: {receipt.run.log_tail[-300:].strip()!r})",
                component=ctx.component,
                field=field,
            )
        elif receipt.counts.total == 0:
            found.add(
                "SUITE_EMPTY",
                f"suite {ctx.suite.name} ran no tests",
                severity=Severity.warning,
                component=ctx.component,
                field=field,
            )
        return found
