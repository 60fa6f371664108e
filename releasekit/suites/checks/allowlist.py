"""Allowlist entries: expired ones are findings, ones whose test no longer fails are reported for removal."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.suites.context import SuiteContext


class AllowlistCheck:
    name = "allowlist"
    codes: tuple[str, ...] = ("ALLOWLIST_EXPIRED", "ALLOWLIST_STALE")

    def run(self, ctx: SuiteContext) -> Findings:
        found = Findings()
        if ctx.receipt.status in ("skipped", "timed-out"):
            return found
        failing = {f.test: f for f in ctx.receipt.failures if f.verdict != "flaky"}
        field = f"tests.{ctx.suite.name}.allowlist"
        for entry in ctx.suite.allowlist:
            failure = failing.get(entry.test)
            if entry.expires < ctx.today:
                found.add(
                    "ALLOWLIST_EXPIRED",
                    f"the acceptance of {entry.test} expired on {entry.expires}",
                    severity=Severity.error if failure else Severity.warning,
                    component=ctx.component,
                    field=field,
                    path=entry.test,
                )
            if failure is None:
                found.add(
                    "ALLOWLIST_STALE",
                    f"{entry.test} no longer fails: remove it from the allowlist",
                    severity=Severity.warning,
                    component=ctx.component,
                    field=field,
                    path=entry.test,
                )
        return found
