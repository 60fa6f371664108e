"""``plan compose``: merge the planned PRs, in order, onto a fresh checkout of the base.

Seed 003: "The open vLLM PRs above were merged locally in the stated dependency order.
The merge completed without conflicts." This makes that claim reproducible: a conflict
is a finding naming the PR and the files, and the resulting tree is compared with the
lock's (``composed_tree`` when the lock was made with ``--compose``, else the tree of
the locked commit, which is what canonical holds once the plan has landed).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from releasekit.findings import Findings
from releasekit.git.checkout import fresh_checkout
from releasekit.git.history import is_ancestor
from releasekit.git.mirror import Mirror
from releasekit.git.runner import Git, GitFailed
from releasekit.git.scratch import object_times_kept
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import GitComponent
from releasekit.plan.mirrors import open_mirror
from releasekit.plan.models import ComponentCompose, ComposeResult, ComposeStep
from releasekit.records.lock import Lock, LockedGitComponent

# Fixed identity and time: the composed commits (not only their trees) are reproducible.
_FIXED = {"GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z"}


@dataclass(frozen=True)
class Composable:
    """One git component to compose: its name, its manifest entry, its mirror and its lock entry
    (None when there is no lock: the planned PRs' heads are then the mirror's)."""

    name: str
    comp: GitComponent
    mirror: Mirror
    locked: LockedGitComponent | None


def compose_component(
    component: Composable, findings: Findings, *, base: str | None = None, compare: bool = True
) -> ComponentCompose:
    name, comp, mirror, locked = component.name, component.comp, component.mirror, component.locked
    if base is None:
        base = (
            locked.canonical_head
            if locked
            else mirror.branch_head(comp.canonical_branch or mirror.default_branch())
        )
    with tempfile.TemporaryDirectory(prefix="releasekit-compose-") as tmp:
        result = compose_into(component, findings, Path(tmp) / "tree", base=base)
    if locked is not None and compare:
        result.expected_tree = locked.composed_tree or locked.tree
        result.matches_lock = result.tree == result.expected_tree
        if not result.matches_lock:
            findings.add(
                "COMPOSED_TREE_MISMATCH",
                f"base {base[:12]} + planned PRs gives tree {result.tree}, the lock expects {result.expected_tree}",
                component=name,
            )
    return result


def compose_into(component: Composable, findings: Findings, dest: Path, *, base: str) -> ComponentCompose:
    """Compose in ``dest`` (a new directory) and leave the work tree there."""
    name, mirror, locked = component.name, component.mirror, component.locked
    heads = {p.number: p.head for p in (locked.pull_requests if locked else []) if p.role == "planned"}
    result = ComponentCompose(
        component=name, repo=mirror.url, base=base, planned=len(component.comp.merge_plan)
    )
    work = fresh_checkout(mirror, base, dest)
    git = Git(work.path)
    # The checkout borrows objects from the cache (and a --mirror): merging must not re-touch them.
    with object_times_kept(git):
        _merge_in_order(component, git, heads, result, findings)
    result.tree = _tree(git)
    return result


def _merge_in_order(
    component: Composable, git: Git, heads: dict[int, str], result: ComponentCompose, findings: Findings
) -> None:
    comp, mirror, name = component.comp, component.mirror, component.name
    for planned in comp.merge_plan:
        head = heads.get(planned.pr) or mirror.pr_head(planned.pr)
        if head is None:
            findings.add(
                "PR_MISSING", f"no refs/pull/{planned.pr}/head to compose", component=name, pr=planned.pr
            )
            continue
        if is_ancestor(git, head, "HEAD"):
            result.steps.append(
                ComposeStep(pr=planned.pr, head=head, result="already-contained", tree=_tree(git))
            )
            continue
        try:
            git.run(
                "merge", "--no-ff", "--no-edit", "-m", f"compose: merge #{planned.pr}", head, extra_env=_FIXED
            )
        except GitFailed:
            files = [f for f in git.run("diff", "--name-only", "--diff-filter=U").splitlines() if f]
            git.run("merge", "--abort", check=False)
            findings.add(
                "MERGE_CONFLICT",
                f"merging PR #{planned.pr} in plan order conflicts in {', '.join(files) or 'the index'}",
                component=name,
                pr=planned.pr,
                path=files[0] if files else None,
            )
            result.steps.append(
                ComposeStep(pr=planned.pr, head=head, result="conflict", conflicts=files, tree=_tree(git))
            )
            continue
        result.steps.append(ComposeStep(pr=planned.pr, head=head, result="merged", tree=_tree(git)))


def _tree(git: Git) -> str:
    return git.run("rev-parse", "HEAD^{tree}").strip()


def compose_plan(
    loaded: LoadedManifest,
    *,
    lock: Lock | None = None,
    lock_sha256: str | None = None,
    components: list[str] | None = None,
    cache_dir: Path | None = None,
    allow_local: bool = False,
    fetch: bool = True,
) -> ComposeResult:
    findings = Findings()
    out: list[ComponentCompose] = []
    for name, comp in loaded.manifest.git_components().items():
        if components and name not in components:
            continue
        if not comp.merge_plan and not components:
            continue
        mirror = open_mirror(comp, loaded, cache_dir=cache_dir, allow_local=allow_local, fetch=fetch)
        locked = lock.git_components().get(name) if lock else None
        out.append(compose_component(Composable(name, comp, mirror, locked), findings))
    return ComposeResult(passed=findings.passed, lock_sha256=lock_sha256, components=out, findings=findings)
