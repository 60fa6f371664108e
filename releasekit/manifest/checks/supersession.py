"""A superseded PR is neither planned nor already canonical, and nothing supersedes itself."""

from __future__ import annotations

from collections.abc import Sequence

from releasekit.findings import Findings
from releasekit.manifest.checks.context import Located, ManifestContext, git_components
from releasekit.manifest.models import CanonicalChange, PlannedPR


class SupersededNotPlanned:
    name = "superseded-not-planned"
    codes = ("SUPERSEDED_PR_PLANNED", "SUPERSEDED_PR_CANONICAL", "SELF_SUPERSESSION")

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        for name, comp in git_components(ctx):
            planned = {p.pr for p in comp.merge_plan}
            canonical = {c.pr for c in comp.already_canonical if c.pr is not None}
            sections: tuple[tuple[str, Sequence[PlannedPR | CanonicalChange]], ...] = (
                ("merge_plan", comp.merge_plan),
                ("already_canonical", comp.already_canonical),
            )
            for section, entries in sections:
                for i, entry in enumerate(entries):
                    label = (
                        f"#{entry.pr}" if entry.pr is not None else f"commit {getattr(entry, 'commit', '')}"
                    )
                    for j, sup in enumerate(entry.supersedes):
                        path = ("components", name, section, i, "supersedes", j)
                        if sup in planned:
                            out.add(
                                "SUPERSEDED_PR_PLANNED",
                                f"PR #{sup} is superseded by {label} but is also in the merge plan",
                                path,
                                component=name,
                                pr=sup,
                            )
                        elif sup in canonical:
                            out.add(
                                "SUPERSEDED_PR_CANONICAL",
                                f"PR #{sup} is superseded by {label} but is also listed as already canonical",
                                path,
                                component=name,
                                pr=sup,
                            )
                        if entry.pr is not None and sup == entry.pr:
                            out.add(
                                "SELF_SUPERSESSION",
                                f"{label} supersedes itself",
                                path,
                                component=name,
                                pr=sup,
                            )
        return out.findings
