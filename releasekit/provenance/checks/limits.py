"""The verifier's own bounds: a limit it hit is an error (what it did not read is not verified)."""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.context import NeedsImageFiles, VerifyContext


class LimitsCheck(NeedsImageFiles):
    name = "verify-limits"
    codes = ("VERIFY_LIMIT_REACHED",)

    def examines(self, ctx: VerifyContext) -> Examined:
        """The paths read within the bounds (a bound hit is a finding)."""
        return Examined.of("files", ctx.inventory.files)

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        for message in [*ctx.limits, *ctx.inventory.limits]:
            found.add("VERIFY_LIMIT_REACHED", message)
        return found
