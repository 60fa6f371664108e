"""The checked commit holds no overlay, fixed-commit fetch, patch or deployment file that nobody
answers for (the content rules, docs/plan.md); release refs' own hits are shown as warnings."""

from __future__ import annotations

from typing import Any

from releasekit.findings import Findings, Severity
from releasekit.manifest.content_rules import CONTENT_RULES
from releasekit.plan.checks.context import PlanContext
from releasekit.plan.content.claims import accepted_by, claiming, grouped

# One code per rule family, so a gate or a reader can tell a fetch from a launcher.
FAMILY_CODES = {
    "vcs-fetch": "VCS_FETCH_IN_TREE",
    "source-overlay": "SOURCE_OVERLAY_IN_TREE",
    "unpublished-patch": "UNPUBLISHED_PATCH_IN_TREE",
    "deployment": "DEPLOYMENT_FILE_IN_TREE",
}


class TreeContentAnswered:
    name = "tree-content"
    codes = (
        "VCS_FETCH_IN_TREE",
        "SOURCE_OVERLAY_IN_TREE",
        "UNPUBLISHED_PATCH_IN_TREE",
        "DEPLOYMENT_FILE_IN_TREE",
        "CONTENT_ACCEPTED",
        "CONTENT_UNREAD",
        "CONTENT_ON_RELEASE_REF",
    )

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        manifest = ctx.loaded.manifest
        for name, content in ctx.content.items():
            comp = manifest.git_components()[name]
            scan = content.checked
            for group in grouped(scan.hits):
                hit = group.first
                where: dict[str, Any] = {
                    "component": name,
                    "commit": scan.commit,
                    "file": hit.file,
                    "line": hit.line,
                }
                accepted = accepted_by(comp, hit)
                if accepted is not None:
                    findings.add(
                        "CONTENT_ACCEPTED",
                        f"{group.shown()}; accepted: {accepted.reason}",
                        severity=Severity.info,
                        **where,
                    )
                elif next(claiming(manifest, name, hit), None) is None:
                    family = CONTENT_RULES[hit.rule][0]
                    findings.add(
                        FAMILY_CODES[family],
                        f"{group.shown()}; no exclusion claims rule {hit.rule} and no accepted_files entry accepts it",
                        **where,
                    )
            for path, why in scan.unread:
                findings.add(
                    "CONTENT_UNREAD",
                    f"{path} was not read by the content rules: {why}",
                    severity=Severity.warning,
                    component=name,
                    commit=scan.commit,
                    file=path,
                )
            canonical = {(h.file, h.rule) for h in scan.hits}
            for ref, release in content.releases:
                for group in grouped(tuple(h for h in release.hits if (h.file, h.rule) not in canonical)):
                    findings.add(
                        "CONTENT_ON_RELEASE_REF",
                        f"{ref}: {group.shown()} (only on the release ref; the checked commit does not carry it)",
                        severity=Severity.warning,
                        component=name,
                        commit=release.commit,
                        file=group.first.file,
                        line=group.first.line,
                    )
        return findings
