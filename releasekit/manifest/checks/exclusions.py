"""Exclusions have unique ids, name known components, are not planned, and say how to recognise them."""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.manifest.checks.context import Located, ManifestContext
from releasekit.manifest.content_rules import CONTENT_RULES
from releasekit.manifest.models import REQUIRED_DISPOSITIONS, Exclusion, GitComponent


def recognised_by(ex: Exclusion) -> list[str]:
    """How plan check recognises an exclusion, each way in words (content rules by family)."""
    families: dict[str, list[str]] = {}
    for rule in ex.rules:
        families.setdefault(CONTENT_RULES[rule][0], []).append(rule)
    ways = [f"content rules {', '.join(rules)} ({family})" for family, rules in families.items()]
    if ex.paths:
        ways.append(f"path globs ({len(ex.paths)})")
    if ex.message_pattern:
        ways.append("the subject pattern")
    if ex.pr is not None:
        ways.append(f"PR #{ex.pr}")
    if ex.upstream is not None:
        ways.append("the upstream change's patch-ids")
    if ex.commits or ex.patch_ids:
        ways.append("its commits/patch-ids")
    return ways


class ExclusionsWellFormed:
    name = "exclusions"
    codes = (
        "DUPLICATE_EXCLUSION",
        "UNKNOWN_COMPONENT",
        "EXCLUDED_PR_PLANNED",
        "EXCLUSION_NOT_CHECKABLE",
        "EXCLUSION_RECOGNISED_BY",
    )

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
                    f"exclusion '{ex.id}' ({ex.disposition}) gives no pr, upstream, commits, patch_ids, paths, message_pattern or rules: "
                    "it is recorded, but plan check cannot detect it",
                    path,
                    severity=Severity.warning if required else Severity.info,
                )
            else:
                out.add(
                    "EXCLUSION_RECOGNISED_BY",
                    f"exclusion '{ex.id}' is recognised by " + "; ".join(recognised_by(ex)),
                    path,
                    severity=Severity.info,
                )
        return out.findings
