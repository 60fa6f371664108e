"""Each component's modules are imported from its own distribution's files, not from an overlay.

Where a module comes from is something only a running interpreter can say (sys.path
order, .pth files, PYTHONPATH, the working directory), so this check reads the probe's
``importlib.util.find_spec`` answers and holds them against the RECORD read on the host.
"""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.context import NeedsImageFiles, VerifyContext

# Variables that change what Python imports or what the dynamic loader maps in.
OVERLAY_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONSTARTUP",
    "PYTHONEXECUTABLE",
    "LD_PRELOAD",
)


class ShadowingCheck(NeedsImageFiles):
    name = "shadowing"
    codes = ("PROBE_FAILED", "MODULE_SHADOWED", "MODULE_NOT_IMPORTABLE", "ENV_OVERLAY")

    def examines(self, ctx: VerifyContext) -> Examined:
        """The overlay variables of the image's environment and every module an installed component names."""
        modules = {f"module {m}" for c in ctx.components.values() if c.installed for m in c.import_names}
        return Examined.of("values", {f"env {k}" for k in OVERLAY_ENV} | modules)

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        for key in OVERLAY_ENV:
            value = ctx.image.env.get(key)
            if value:
                found.add(
                    "ENV_OVERLAY",
                    f"the image sets {key}={value}: imports no longer follow the installed RECORDs",
                    field=key,
                )
        for word in [*ctx.image.entrypoint, *ctx.image.cmd]:
            for key in OVERLAY_ENV:
                if f"{key}=" in word:
                    found.add("ENV_OVERLAY", f"the image's entrypoint/command sets {key}", field=key)
        if not ctx.probe.ok or ctx.probe.report is None:
            found.add("PROBE_FAILED", f"the in-image probe gave no report: {ctx.probe.error}")
            return found
        specs = {s.get("name"): s for s in ctx.probe.report.get("specs") or [] if isinstance(s, dict)}
        for name, comp in ctx.components.items():
            if not comp.installed:
                continue
            dist = ctx.dist_for(comp)
            for module in comp.import_names:
                spec = specs.get(module)
                if spec is None or not spec.get("found"):
                    found.add(
                        "MODULE_NOT_IMPORTABLE",
                        f"import {module} finds nothing: {spec.get('error') if spec else 'not probed'}",
                        component=name,
                    )
                    continue
                if dist is None:
                    continue  # COMPONENT_NOT_INSTALLED says it already
                places = self._places(spec)
                foreign = [p for p in places if not self._owned_by(ctx, dist, p)]
                if foreign:
                    found.add(
                        "MODULE_SHADOWED",
                        f"import {module} resolves to {foreign[0]}, which is not a file of {dist.name} {dist.version}",
                        component=name,
                        path=foreign[0],
                    )
        return found

    @staticmethod
    def _places(spec: dict) -> list[str]:
        origin = spec.get("origin")
        locations = [str(p) for p in spec.get("search_locations") or []]
        if isinstance(origin, str) and origin.startswith("/"):
            return [origin, *locations]
        return locations  # a namespace package: every portion must be the distribution's

    @staticmethod
    def _owned_by(ctx: VerifyContext, dist, place: str) -> bool:
        real = ctx.inventory.resolve(place) or place
        if real in dist.files:
            return True
        entry = ctx.inventory.files.get(real)
        if entry is None or entry.kind != "dir":
            return False
        prefix = real.rstrip("/") + "/"
        inside = [p for p, e in ctx.inventory.files.items() if p.startswith(prefix) and e.kind != "dir"]

        def mine(path: str) -> bool:
            return path in dist.files or (
                "/__pycache__/" in path and path.endswith(".pyc") and ctx.owned(path)
            )

        return bool(inside) and all(mine(p) for p in inside)
