"""Native extensions of a component carry machine code (a cubin) for every arch of the manifest's list."""

from __future__ import annotations

from releasekit.checks import Examined
from releasekit.findings import Findings
from releasekit.provenance.context import NeedsImageFiles, VerifyContext


class NativeArchCheck(NeedsImageFiles):
    name = "native-arches"
    codes = ("NATIVE_ARCH_MISSING", "NATIVE_CODE_MISSING", "NATIVE_FATBIN_MALFORMED")

    def examines(self, ctx: VerifyContext) -> Examined:
        """The libraries with a CUDA fatbin section of each component built for CUDA arches."""
        native = [c for c in ctx.components.values() if c.native_arches and c.installed]
        if not native:
            return Examined.of("libraries", (), absent="no installed component is built for a CUDA arch")
        return Examined.of(
            "libraries",
            (
                p
                for c in native
                if (d := ctx.dist_for(c)) is not None
                for p in d.files
                if p in ctx.inventory.fatbins
            ),
        )

    def run(self, ctx: VerifyContext) -> Findings:
        found = Findings()
        for name, comp in ctx.components.items():
            if not comp.native_arches or not comp.installed:
                continue
            dist = ctx.dist_for(comp)
            if dist is None:
                continue
            reports = {p: ctx.inventory.fatbins[p] for p in sorted(dist.files) if p in ctx.inventory.fatbins}
            if not reports:
                found.add(
                    "NATIVE_CODE_MISSING",
                    f"{dist.name} is built for {', '.join(comp.native_arches)} but no extension has CUDA code",
                    component=name,
                )
                continue
            for path, report in reports.items():
                if report.malformed:
                    found.add(
                        "NATIVE_FATBIN_MALFORMED",
                        "the .nv_fatbin section cannot be read",
                        component=name,
                        path=path,
                    )
                    continue
                lacking = [a for a in comp.native_arches if not report.has_machine_code_for(a)]
                if lacking:
                    have = ", ".join(report.cubin_targets()) or "none"
                    found.add(
                        "NATIVE_ARCH_MISSING",
                        f"no machine code for {', '.join(lacking)} (cubins: {have}; PTX: {', '.join(report.ptx_targets()) or 'none'})",
                        component=name,
                        path=path,
                    )
        return found
