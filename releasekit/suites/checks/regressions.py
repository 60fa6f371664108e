"""A failure that does not reproduce on the baseline is a regression; one that cannot be judged fails too."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.suites.context import SuiteContext


class RegressionCheck:
    name = "regressions"
    codes: tuple[str, ...] = ("TEST_REGRESSION", "FAILURE_UNJUDGED", "PRE_EXISTING_FAILURE")

    def run(self, ctx: SuiteContext) -> Findings:
        found = Findings()
        for failure in ctx.receipt.failures:
            where = {"component": ctx.component, "path": failure.test}
            if failure.verdict == "regression":
                base = failure.baseline.image_id[:19] if failure.baseline else "the baseline"
                found.add(
                    "TEST_REGRESSION",
                    f"{failure.test} {failure.outcome} in the candidate, twice, and passes on {base}: "
                    f"{failure.message or 'no message'}",
                    **where,
                )
            elif failure.verdict == "unjudged":
                found.add(
                    "FAILURE_UNJUDGED",
                    f"{failure.test} {failure.outcome} and no baseline run could judge it "
                    f"({'baseline: ' + failure.baseline.outcome if failure.baseline else 'no baseline image'})",
                    **where,
                )
            elif failure.verdict == "pre-existing":
                found.add(
                    "PRE_EXISTING_FAILURE",
                    f"{failure.test} fails on the baseline too; accepted as pre-existing",
                    severity=Severity.warning,
                    **where,
                )
        return found
