"""``provenance.record`` names components or toolchain items only."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext

_TOOLCHAIN_ITEMS = frozenset({"pytorch", "cuda", "nccl", "cudnn", "python", "base-image"})


class ProvenanceItems:
    name = "provenance-items"
    codes = ("UNKNOWN_PROVENANCE_ITEM",)

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        for i, item in enumerate(ctx.manifest.provenance.record):
            if item not in ctx.manifest.components and item not in _TOOLCHAIN_ITEMS:
                out.add(
                    "UNKNOWN_PROVENANCE_ITEM",
                    f"provenance.record names '{item}', which is neither a component nor one of {', '.join(sorted(_TOOLCHAIN_ITEMS))}",
                    ("provenance", "record", i),
                )
        return out.findings
