"""The release-only audit as a service: resolve the repository and refs, gather `carries:`, run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from releasekit.errors import InputError
from releasekit.git.mirror import Mirror
from releasekit.git.remote import check_ref
from releasekit.git.runner import Git, GitFailed
from releasekit.plan.release_only import find_release_only

if TYPE_CHECKING:
    from releasekit.manifest.models import GitComponent
    from releasekit.records.plan_check import ReleaseOnlyReport

# The manifest (its pydantic models cost a third of the command's start) is imported only
# when --manifest is given: ``audit release-only --repo`` is timed against ``git cherry``.


def _resolve(git: Git, rev: str, repo: str) -> str:
    check_ref(rev)
    for candidate in (rev, f"refs/remotes/origin/{rev}"):
        try:
            return git.run(
                "rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"
            ).strip()
        except GitFailed:
            continue
    raise InputError(f"{repo}: cannot resolve {rev!r} to a commit")


def _component(manifest: Path, component: str | None) -> GitComponent:
    """The manifest's git component to audit: the one named, or its only one."""
    from releasekit.manifest import load_manifest

    loaded = load_manifest(manifest)
    gits = loaded.manifest.git_components()
    if component is None:
        if len(gits) != 1:
            raise InputError("--manifest needs --component when the manifest has several git components")
        component = next(iter(gits))
    if component not in gits:
        raise InputError(f"no git component named {component!r} in {manifest}")
    return gits[component]


def _carried(git: Git, comp: GitComponent, canonical_sha: str) -> dict[str, int]:
    """Release-only commit prefixes that merged PRs of the plan carry (``carries:``), prefix -> PR."""
    carried: dict[str, int] = {}
    if not any(p.carries for p in comp.merge_plan):
        return carried
    from releasekit.plan.merged import CanonicalHistory

    history = CanonicalHistory(git, canonical_sha)
    for planned in comp.merge_plan:
        if not planned.carries:
            continue
        try:
            head = git.run(
                "rev-parse", "--verify", "--quiet", f"refs/pull/{planned.pr}/head^{{commit}}"
            ).strip()
        except GitFailed:
            continue
        if history.state_of(head).merged:
            for prefix in planned.carries:
                carried[prefix] = planned.pr
    return carried


def release_only_audit(
    repo: str,
    release: str,
    canonical: str,
    *,
    manifest: Path | None = None,
    component: str | None = None,
    cache_dir: Path | None = None,
    allow_local: bool = False,
    fetch: bool = True,
) -> ReleaseOnlyReport:
    comp = _component(manifest, component) if manifest is not None else None
    if comp is not None and repo == ".":
        repo = comp.repo
    local = Path(repo)
    if "://" not in repo and local.is_dir() and ((local / ".git").exists() or (local / "HEAD").is_file()):
        # A repository on disk that the user named: read it in place, no mirror.
        git = Git(local.resolve())
        public = str(repo)
    else:
        mirror = Mirror(repo, cache_dir, allow_local=allow_local)
        mirror = mirror.update() if fetch else mirror.ensure()
        git = mirror.git
        public = mirror.url
    release_sha = _resolve(git, release, public)
    canonical_sha = _resolve(git, canonical, public)
    carried = _carried(git, comp, canonical_sha) if comp is not None else {}
    return find_release_only(
        git,
        release_sha,
        canonical_sha,
        repo=public,
        release_name=release,
        canonical_name=canonical,
        carried=carried,
    )
