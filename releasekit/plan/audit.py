"""The release-only audit as a service: resolve the repository and refs, gather `carries:`, run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from releasekit.errors import InputError
from releasekit.git.history import resolve_commits
from releasekit.git.mirror import Mirror
from releasekit.git.mirrors import check_mirrors_named, mirror_for
from releasekit.git.missing import missing_object_note, unresolvable_rev
from releasekit.git.private import read_in_place
from releasekit.git.remote import check_ref
from releasekit.git.runner import Git, GitFailed
from releasekit.plan.release_only import Upstream, find_release_only

if TYPE_CHECKING:
    from releasekit.manifest.models import GitComponent
    from releasekit.records.release_only import ReleaseOnlyReport

# The manifest (its pydantic models cost a third of the command's start) is imported only
# when --manifest is given: ``audit release-only --repo`` is timed against ``git cherry``.


def _resolve(git: Git, rev: str, repo: str, mirror: Mirror | None = None) -> str:
    check_ref(rev)
    for candidate in (rev, f"refs/remotes/origin/{rev}"):
        try:
            return git.run(
                "rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"
            ).strip()
        except GitFailed:
            continue
    why = next(
        (w for c in (rev, f"refs/heads/{rev}", f"refs/tags/{rev}") if mirror and (w := mirror.why_absent(c))),
        "",
    )
    if why:
        raise InputError(f"{repo}: cannot resolve {rev!r} to a commit{why}")
    raise unresolvable_rev(git, rev, repo)


def _component(manifest: Path, component: str | None, repo: str) -> GitComponent:
    """The manifest's git component to audit: the one named, or its only one."""
    from releasekit.manifest import load_manifest

    loaded = load_manifest(manifest, also_reads=[repo] if repo != "." else [])
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
    upstream: str | None = None,
) -> ReleaseOnlyReport:
    """``upstream``: a revision of the repository that is the fork's upstream head (``upstream/main``,
    a commit); without it, the manifest component's ``upstream:`` is read when ``--manifest`` is given.
    """
    comp = _component(manifest, component, repo) if manifest is not None else None
    if manifest is None:
        check_mirrors_named([repo], source="--repo")
    if comp is not None and repo == ".":
        repo = comp.repo
    git, public, mirror = _open_repository(repo, cache_dir, allow_local, fetch)
    mirror_path = mirror.path if mirror else None
    names = [release, canonical] if upstream is None else [release, canonical, upstream]
    for name in names:
        check_ref(name)
    # One git process for all of them; a name that needs the origin/ fallback or does not
    # resolve is looked up again alone (for its error message).
    shas = resolve_commits(git, *names) or [_resolve(git, name, public, mirror) for name in names]
    release_sha, canonical_sha = shas[0], shas[1]
    up, unread = _upstream(
        git,
        comp,
        upstream,
        shas,
        mirror_path=mirror_path,
        base_dir=manifest.parent if manifest is not None else None,
        allow_local=allow_local,
        fetch=fetch,
    )
    carried = _carried(git, comp, canonical_sha) if comp is not None else {}
    try:
        return find_release_only(
            git,
            release_sha,
            canonical_sha,
            repo=public,
            release_name=release,
            canonical_name=canonical,
            carried=carried,
            upstream=up,
            upstream_unread=unread,
        )
    except GitFailed as exc:
        # Which file of which commit a snapshot lacks, when git could not read an object.
        note = missing_object_note(git, exc)
        if not note:
            raise
        raise InputError(exc.one_line() + note) from None


def _upstream(
    git: Git,
    comp: GitComponent | None,
    upstream: str | None,
    shas: list[str],
    *,
    mirror_path: Path | None,
    base_dir: Path | None,
    allow_local: bool,
    fetch: bool,
) -> tuple[Upstream | None, str | None]:
    """(upstream, why unread): ``--upstream`` wins over the manifest's ``upstream:``; neither is no upstream."""
    base = comp.upstream if comp is not None else None
    up: Upstream | None = None
    unread: str | None = None
    if upstream is not None:
        up = Upstream(base.repo if base else "(--upstream)", upstream, shas[2])
    elif base is not None:
        from releasekit.plan.upstream_base import read_upstream_base

        up, unread = read_upstream_base(
            git,
            base,
            mirror_path=mirror_path,
            allow_local=allow_local,
            base_dir=base_dir,
            fetch=fetch,
        )
    return up, unread


def _open_repository(
    repo: str, cache_dir: Path | None, allow_local: bool, fetch: bool
) -> tuple[Git, str, Mirror | None]:
    """(git, public name, the mirror read through or None): a repository on disk is read in place, any other through a mirror."""
    local = Path(repo)
    mirror: Mirror | None = None
    if "://" not in repo and local.is_dir() and ((local / ".git").exists() or (local / "HEAD").is_file()):
        # A repository on disk that the user named: read in place, no mirror, through a private
        # repository of this process (git/private.py): git never runs in the one named.
        git = Git(read_in_place(local.resolve(), str(repo)).path, bare=True, label=str(repo))
        public = str(repo)
    elif _names_a_path(repo) and not local.expanduser().exists() and mirror_for(repo) is None:
        raise InputError(f"no such repository: {repo}")
    else:
        mirror = Mirror(repo, cache_dir, allow_local=allow_local)
        mirror = mirror.update() if fetch else mirror.ensure()
        git = mirror.git
        public = mirror.url
    return git, public, mirror


def _names_a_path(repo: str) -> bool:
    """Whether ``--repo`` is a path on this machine rather than a URL (``https://``, ``file://``, ``host:path``)."""
    if "://" in repo:
        return False
    head = repo.split("/", 1)[0]
    return repo.startswith((".", "/", "~")) or ":" not in head
