"""Every ``after:`` names a known component and a PR that will be merged (not itself, closed or superseded)."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest.checks.context import (
    Located,
    ManifestContext,
    PRKey,
    git_components,
    known_prs,
    parse_pr_reference,
)


class AfterTargets:
    name = "after-targets"
    codes = ("UNKNOWN_COMPONENT", "SELF_DEPENDENCY", "UNKNOWN_AFTER_TARGET", "AFTER_TARGET_NOT_MERGED")

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        known = known_prs(ctx)
        components = ctx.manifest.components
        for name, comp in git_components(ctx):
            for i, planned in enumerate(comp.merge_plan):
                for j, ref in enumerate(planned.after):
                    path = ("components", name, "merge_plan", i, "after", j)
                    target = parse_pr_reference(ref, name)
                    if target.component not in components:
                        out.add(
                            "UNKNOWN_COMPONENT",
                            f"'after: {ref}' names component '{target.component}', which this manifest does not have",
                            path,
                            component=name,
                            pr=planned.pr,
                        )
                        continue
                    if target == PRKey(name, planned.pr):
                        out.add(
                            "SELF_DEPENDENCY",
                            f"PR #{planned.pr} lists itself in 'after'",
                            path,
                            component=name,
                            pr=planned.pr,
                        )
                        continue
                    state = known.get(target)
                    if state is None:
                        out.add(
                            "UNKNOWN_AFTER_TARGET",
                            f"PR #{planned.pr} must land after {target}, which is not in any merge plan or canonical list",
                            path,
                            component=name,
                            pr=planned.pr,
                        )
                    elif state in ("closed", "superseded"):
                        out.add(
                            "AFTER_TARGET_NOT_MERGED",
                            f"PR #{planned.pr} must land after {target}, which is {state} and must not be merged",
                            path,
                            component=name,
                            pr=planned.pr,
                        )
        return out.findings
