"""A test that failed and then passed on a second run in the same image is flaky, and says so."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.suites.context import SuiteContext


class FlakyCheck:
    name = "flaky"
    codes: tuple[str, ...] = ("FLAKY_TEST",)

    def run(self, ctx: SuiteContext) -> Findings:
        found = Findings()
        for failure in ctx.receipt.failures:
            if failure.verdict == "flaky":
                found.add(
                    "FLAKY_TEST",
                    f"{failure.test} {failure.outcome}, then passed on a rerun in the candidate",
                    severity=Severity.warning,
                    component=ctx.component,
                    path=failure.test,
                )
        return found
