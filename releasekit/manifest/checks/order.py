"""Within one component, the plan lists a PR after the PRs its ``after:`` names."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext, git_components, parse_pr_reference


class OrderRespectsAfter:
    name = "order-respects-after"
    codes = ("ORDER_CONTRADICTS_AFTER",)

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        for name, comp in git_components(ctx):
            position = {p.pr: i for i, p in enumerate(comp.merge_plan)}
            for i, planned in enumerate(comp.merge_plan):
                for j, ref in enumerate(planned.after):
                    target = parse_pr_reference(ref, name)
                    if target.component == name and target.number in position and position[target.number] > i:
                        out.add(
                            "ORDER_CONTRADICTS_AFTER",
                            f"PR #{planned.pr} is listed at position {i + 1} but must land after #{target.number}, listed at position {position[target.number] + 1}",
                            ("components", name, "merge_plan", i, "after", j),
                            component=name,
                            pr=planned.pr,
                        )
        return out.findings
