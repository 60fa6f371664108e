"""Exclusions have unique ids, name known components, are not planned, and say how to recognise them."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.manifest.checks.context import Located, ManifestContext
from releasekit.manifest.models import REQUIRED_DISPOSITIONS, GitComponent


class ExclusionsWellFormed:
    name = "exclusions"
    codes = ("DUPLICATE_EXCLUSION", "UNKNOWN_COMPONENT", "EXCLUDED_PR_PLANNED", "EXCLUSION_NOT_CHECKABLE")

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        seen: set[str] = set()
        for i, ex in enumerate(ctx.manifest.exclusions):
            path = ("exclusions", i)
            if ex.id in seen:
                out.add("DUPLICATE_EXCLUSION", f"exclusion id '{ex.id}' is used twice", (*path, "id"))
            seen.add(ex.id)
            if ex.component is not None and ex.component not in ctx.manifest.components:
                out.add(
                    "UNKNOWN_COMPONENT",
                    f"exclusion '{ex.id}' names component '{ex.component}', which this manifest does not have",
                    (*path, "component"),
                )
            if ex.pr is not None and ex.component is not None:
                comp = ctx.manifest.components.get(ex.component)
                if isinstance(comp, GitComponent) and ex.pr in {p.pr for p in comp.merge_plan}:
                    out.add(
                        "EXCLUDED_PR_PLANNED",
                        f"PR #{ex.pr} is both excluded ('{ex.id}') and in the merge plan",
                        (*path, "pr"),
                        component=ex.component,
                        pr=ex.pr,
                    )
            if not ex.checkable():
                required = ex.disposition in REQUIRED_DISPOSITIONS
                out.add(
                    "EXCLUSION_NOT_CHECKABLE",
                    f"exclusion '{ex.id}' ({ex.disposition}) gives no pr, upstream, commits, patch_ids, paths or message_pattern: "
                    "it is recorded, but plan check cannot detect it",
                    path,
                    severity=Severity.warning if required else Severity.info,
                )
        return out.findings
