"""Each package is pinned once, pins agree with wheel components, no component is a forbidden distribution."""

from __future__ import annotations

import fnmatch

from packaging.utils import canonicalize_name

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext


class PinsConsistent:
    name = "pins-consistent"
    codes = ("DUPLICATE_PIN", "PIN_CONFLICT", "FORBIDDEN_COMPONENT")

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        m = ctx.manifest
        seen: dict[str, int] = {}
        for i, pin in enumerate(m.pins):
            key = canonicalize_name(pin.package)
            if key in seen:
                out.add("DUPLICATE_PIN", f"{pin.package} is pinned twice", ("pins", i, "package"))
            seen[key] = i
        wheels = {canonicalize_name(w.distribution): (n, w) for n, w in m.wheel_components().items()}
        for i, pin in enumerate(m.pins):
            hit = wheels.get(canonicalize_name(pin.package))
            if hit and hit[1].version != pin.version:
                out.add(
                    "PIN_CONFLICT",
                    f"pin {pin.package}=={pin.version} disagrees with component '{hit[0]}' ({hit[1].requirement})",
                    ("pins", i, "version"),
                    component=hit[0],
                )
        for i, pattern in enumerate(m.policy.forbidden_distributions):
            for name, wheel in m.wheel_components().items():
                dist = canonicalize_name(wheel.distribution)
                allowed = any(
                    fnmatch.fnmatch(dist, canonicalize_name(a)) for a in m.policy.allowed_distributions
                )
                if fnmatch.fnmatch(dist, pattern) and not allowed:
                    out.add(
                        "FORBIDDEN_COMPONENT",
                        f"component '{name}' ({wheel.distribution}) matches forbidden distribution pattern '{pattern}'",
                        ("policy", "forbidden_distributions", i),
                        component=name,
                    )
        return out.findings
