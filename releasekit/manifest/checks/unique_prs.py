"""A PR number appears once per component: in the merge plan, already canonical or closed."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext, git_components
from releasekit.manifest.loader import Path_


class UniquePRNumbers:
    name = "unique-pr-numbers"
    codes = ("DUPLICATE_PR",)

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        for name, comp in git_components(ctx):
            seen: dict[int, str] = {}
            entries: list[tuple[int, str, Path_]] = []
            entries += [
                (p.pr, "merge_plan", ("components", name, "merge_plan", i, "pr"))
                for i, p in enumerate(comp.merge_plan)
            ]
            entries += [
                (c.pr, "already_canonical", ("components", name, "already_canonical", i, "pr"))
                for i, c in enumerate(comp.already_canonical)
                if c.pr is not None
            ]
            entries += [
                (c.pr, "closed", ("components", name, "closed", i, "pr")) for i, c in enumerate(comp.closed)
            ]
            for number, section, path in entries:
                if number in seen:
                    out.add(
                        "DUPLICATE_PR",
                        f"PR #{number} appears in {seen[number]} and again in {section}",
                        path,
                        component=name,
                        pr=number,
                    )
                else:
                    seen[number] = section
        return out.findings
