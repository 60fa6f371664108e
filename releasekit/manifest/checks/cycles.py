"""The merge plans' ``after:`` dependencies form no cycle (the cycle is printed)."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext, dependency_graph, find_cycle


class NoDependencyCycle:
    name = "no-dependency-cycle"
    codes = ("DEPENDENCY_CYCLE",)

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        cycle = find_cycle(dependency_graph(ctx))
        if cycle:
            first = cycle[0]
            comp = ctx.manifest.components[first.component]
            index = next(i for i, p in enumerate(comp.merge_plan) if p.pr == first.number)  # type: ignore[union-attr]
            out.add(
                "DEPENDENCY_CYCLE",
                "merge plan dependencies form a cycle: " + " -> ".join(str(k) for k in cycle),
                ("components", first.component, "merge_plan", index, "after"),
                component=first.component,
                pr=first.number,
            )
        return out.findings
