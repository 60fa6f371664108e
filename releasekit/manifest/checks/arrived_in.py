"""``arrived_in:`` names the PR whose merge brought this one: another PR of the same merge plan."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext, git_components


class ArrivedInNamesAPlannedPR:
    name = "arrived-in"
    codes = ("UNKNOWN_ARRIVED_IN",)

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        for name, comp in git_components(ctx):
            planned = {p.pr for p in comp.merge_plan}
            for i, entry in enumerate(comp.merge_plan):
                carrier = entry.arrived_in
                if carrier is not None and (carrier == entry.pr or carrier not in planned):
                    out.add(
                        "UNKNOWN_ARRIVED_IN",
                        f"PR #{entry.pr} 'arrived_in: {carrier}' must name another PR of {name}'s merge plan",
                        ("components", name, "merge_plan", i, "arrived_in"),
                        component=name,
                        pr=entry.pr,
                    )
        return out.findings
