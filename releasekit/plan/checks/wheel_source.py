"""A wheel's ``source:`` that plan lock could not read is said aloud, not only recorded."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.plan.checks.lock_context import LockContext


class WheelSourcesVerified:
    name = "wheel-sources-verified"
    codes = ("WHEEL_SOURCE_UNVERIFIED",)

    def run(self, ctx: LockContext) -> Findings:
        found = Findings()
        for name, wheel in sorted(ctx.lock.wheel_components().items()):
            source = wheel.source
            if source is None or source.verified:
                continue
            found.add(
                "WHEEL_SOURCE_UNVERIFIED",
                f"the source {source.repo} {source.ref or ''}@{source.commit or 'unknown'} could not be read: "
                "that the wheel was built from it is recorded as given, not checked",
                severity=Severity.error if ctx.strict else Severity.warning,
                component=name,
            )
        return found
