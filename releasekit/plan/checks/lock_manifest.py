"""The lock was made from this manifest."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.plan.checks.context import PlanContext


class LockMatchesManifest:
    name = "lock-matches-manifest"
    codes = ("LOCK_MANIFEST_MISMATCH",)

    def run(self, ctx: PlanContext) -> Findings:
        found = Findings()
        lock, loaded = ctx.lock, ctx.loaded
        if lock is not None and lock.manifest.sha256 != loaded.sha256:
            found.add(
                "LOCK_MANIFEST_MISMATCH",
                f"the lock was made from manifest sha256 {lock.manifest.sha256[:12]}…, this manifest is {loaded.sha256[:12]}…",
            )
        return found
