"""The verifier's own bounds: a limit it hit is an error (what it did not read is not verified)."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.provenance.context import NeedsImageFiles, VerifyContext


class LimitsCheck(NeedsImageFiles):
    name = "verify-limits"
    codes = ("VERIFY_LIMIT_REACHED",)

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        for message in [*ctx.limits, *ctx.inventory.limits]:
            found.add("VERIFY_LIMIT_REACHED", message)
        return found
