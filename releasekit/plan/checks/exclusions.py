"""An excluded change (by PR, commit, patch-id, upstream PR, path glob, subject pattern or content
rule) does not appear."""

from __future__ import annotations

import re

from releasekit.findings import Findings, Severity
from releasekit.git.history import patch_ids
from releasekit.git.tree import commit_files
from releasekit.manifest.models import REQUIRED_DISPOSITIONS, Exclusion
from releasekit.manifest.path_patterns import matching
from releasekit.plan.checks.context import ComponentState, PlanContext, short
from releasekit.plan.content.claims import accepted_by, grouped
from releasekit.plan.upstream import UpstreamPatches


class ExclusionsAbsent:
    name = "exclusions-absent"
    codes = ("EXCLUDED_CHANGE_PRESENT", "EXCLUSION_UPSTREAM_UNREAD", "EXCLUSION_COMMIT_UNKNOWN")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for excl in ctx.loaded.manifest.exclusions:
            named = ctx.components.get(excl.component) if excl.component else None
            targets = (
                [named] if named is not None else ([] if excl.component else list(ctx.components.values()))
            )
            for cs in targets:
                if cs.history is None:
                    continue
                upstream = ctx.upstream.get((excl.id, cs.name))
                if upstream is not None and upstream.unreachable:
                    _upstream_unread(excl, upstream, cs.name, findings)
                hits = exclusion_hits(cs, excl, len(ctx.components) == 1)
                hits += _patch_hits(cs, excl.patch_ids, upstream)
                for hit in hits:
                    findings.add(
                        "EXCLUDED_CHANGE_PRESENT",
                        f"exclusion '{excl.id}' ({excl.description}): {hit}",
                        component=cs.name,
                        pr=excl.pr,
                    )
                _content_hits(ctx, cs, excl, findings)
            _unknown_commits(excl, [cs for cs in targets if cs.history is not None], findings)
        return findings


def _unknown_commits(excl: Exclusion, read: list[ComponentState], findings: Findings) -> None:
    """A listed commit that no component's repository has (each one read): nothing to compare with,
    so it cannot be shown absent; an error where the plan depends on the exclusion."""
    if not read:
        return
    for prefix in excl.commits:
        if any(cs.mirror.has_commit(prefix) for cs in read):
            continue
        where = ", ".join(sorted(cs.name for cs in read))
        findings.add(
            "EXCLUSION_COMMIT_UNKNOWN",
            f"exclusion '{excl.id}': commit {prefix} is in no repository it applies to ({where}): a "
            "mistyped hash, or one the mirror lacks? Neither it nor a copy of it can be looked for",
            severity=Severity.error if excl.disposition in REQUIRED_DISPOSITIONS else Severity.warning,
            component=read[0].name if len(read) == 1 else None,
        )


def _upstream_unread(excl: Exclusion, upstream: UpstreamPatches, component: str, findings: Findings) -> None:
    """An upstream PR that could not be read: a warning, or an error where the repository was read
    and has no such PR while the plan depends on the exclusion (a required disposition)."""
    depends = upstream.absent and excl.disposition in REQUIRED_DISPOSITIONS
    findings.add(
        "EXCLUSION_UPSTREAM_UNREAD",
        f"exclusion '{excl.id}': the commits of {upstream.repo} PR #{upstream.pr} could not be read "
        f"({upstream.unreachable})"
        + ("; the number names nothing there (a mistyped number?)" if upstream.absent else "")
        + "; only its listed commits/patch_ids are checked",
        severity=Severity.error if depends else Severity.warning,
        component=component,
    )


def _content_hits(ctx: PlanContext, cs: ComponentState, excl: Exclusion, findings: Findings) -> None:
    """The content-rule hits this exclusion claims at the checked commit (an accepted file is not one)."""
    content = ctx.content.get(cs.name)
    if content is None or not excl.rules:
        return
    for group in grouped(content.checked.hits):
        if group.first.rule in excl.rules and accepted_by(cs.comp, group.first) is None:
            findings.add(
                "EXCLUDED_CHANGE_PRESENT",
                f"exclusion '{excl.id}' ({excl.description}): {group.shown()}",
                component=cs.name,
                pr=excl.pr,
                commit=content.checked.commit,
                file=group.first.file,
                line=group.first.line,
            )


def _patch_hits(cs: ComponentState, listed: list[str], upstream: UpstreamPatches | None) -> list[str]:
    """Canonical commits patch-equivalent to the exclusion's patch-ids or to its upstream PR's commits."""
    assert cs.history is not None
    wanted: dict[str, str] = {pid: "listed patch-id" for pid in listed}
    if upstream is not None:
        for pid, origin in upstream.patch_ids.items():
            where = f"upstream {upstream.repo}" + (f" PR #{upstream.pr}" if upstream.pr else "")
            wanted.setdefault(
                pid,
                f"{where} commit {short(origin)}" if origin != "manifest" else f"{where} patch-id {pid[:12]}",
            )
    hits: list[str] = []
    for pid, origin in wanted.items():
        for commit in cs.history.equivalents(pid):
            hits.append(f"commit {short(commit)} on {cs.branch} is patch-equivalent to {origin}")
    return hits


def exclusion_hits(cs: ComponentState, excl: Exclusion, single_component: bool) -> list[str]:
    assert cs.history is not None
    git, hist = cs.mirror.git, cs.history
    hits: list[str] = []
    # A PR number names a PR of one repository: without 'component' it is checked only when
    # the manifest has a single git component.
    pr_applies = excl.component is not None or single_component
    if excl.pr is not None and pr_applies:
        head = cs.mirror.pr_head(excl.pr)
        if head:
            st = hist.state_of(head)
            if st.merged or st.present:
                hits.append(f"PR #{excl.pr} is on {cs.branch} ({st.how or 'some commits'})")
    for prefix in excl.commits:
        if not cs.mirror.has_commit(prefix):
            continue
        full = cs.mirror.resolve(prefix)
        if hist.contains(full):
            hits.append(f"commit {prefix} is in the history of {cs.branch}")
            continue
        pid = (
            patch_ids(git, full, f"^{full}^")
            if len(git.run("rev-list", "--parents", "-n1", full).split()) == 2
            else {}
        )
        if pid and any(hist.equivalents(p) for p in pid.values()):
            hits.append(f"a copy of commit {prefix} is on {cs.branch}")
    if excl.paths:
        files = commit_files(git, cs.checked)  # -z: names git would quote are matched as they are
        # gitignore semantics (releasekit.manifest.path_patterns): '*' stays within a segment.
        for pattern, matched in matching(excl.paths, files).items():
            if matched:
                hits.append(
                    f"path {matched[0]} matches '{pattern}'"
                    + (f" (+{len(matched) - 1} more)" if len(matched) > 1 else "")
                )
    if excl.message_pattern:
        regex = re.compile(excl.message_pattern)
        for sha, subject in hist.range_subjects():
            if regex.search(subject):
                hits.append(f"commit {short(sha)} '{subject}' matches /{excl.message_pattern}/")
    return hits
