"""Distributions the manifest forbids (e.g. pip ``nvidia-*`` runtime wheels over the base's CUDA) are absent."""

from __future__ import annotations

from fnmatch import fnmatchcase

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.context import NeedsImageFiles, VerifyContext
from releasekit.provenance.installed import canonical_name


class ForbiddenDistributionCheck(NeedsImageFiles):
    name = "forbidden-distributions"
    codes = ("FORBIDDEN_DISTRIBUTION",)

    def examines(self, ctx: VerifyContext) -> Examined:
        """Every installed distribution, when the manifest forbids any."""
        policy = getattr(ctx.manifest, "policy", None)
        if policy is None or not policy.forbidden_distributions:
            return Examined.of("distributions", (), absent="the manifest forbids no distribution")
        return Examined.of("distributions", (f"{d.name} {d.version}" for d in ctx.dists))

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        policy = getattr(ctx.manifest, "policy", None)
        if policy is None:
            return found
        forbidden = [canonical_name(p) for p in policy.forbidden_distributions]
        allowed = [canonical_name(p) for p in policy.allowed_distributions]
        declared = {canonical_name(c.distribution) for c in ctx.components.values() if c.distribution}
        for dist in ctx.dists:
            key = dist.key
            if key in declared or any(fnmatchcase(key, a) for a in allowed):
                continue
            pattern = next((p for p in forbidden if fnmatchcase(key, p)), None)
            if pattern:
                found.add(
                    "FORBIDDEN_DISTRIBUTION",
                    f"{dist.name} {dist.version} is installed; the manifest forbids {pattern}",
                    path=dist.dist_info,
                )
        return found
