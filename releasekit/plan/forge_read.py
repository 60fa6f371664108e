"""Read the forge's facts about every pull request a manifest names, for the lock.

Named means: planned, already canonical, closed, superseded (by a planned or canonical
entry), or excluded (an exclusion with ``component`` and ``pr``). Per component the forge
is the manifest's ``forge:`` block, else the github.com repository URL; a component with
neither, ``--no-forge``, or a forge that does not answer is recorded as ``absent`` with the
reason. Nothing is invented: a field the forge did not give stays empty.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from releasekit.forge import ForgeLocation, ForgeUnreachable, GitHubForge, PullFacts, locate
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import GitComponent
from releasekit.records.forge import ForgeComponent, ForgeData, ForgePR, PRRole

# What the command's edge hands in (``forge.GitHubForges()``): API URL -> that forge's client.
ForgeOpener = Callable[[str], GitHubForge]


def named_prs(name: str, comp: GitComponent, loaded: LoadedManifest) -> dict[int, list[PRRole]]:
    """PR number -> why the manifest names it (sorted roles)."""
    roles: dict[int, set[PRRole]] = defaultdict(set)
    for planned in comp.merge_plan:
        roles[planned.pr].add("planned")
    for change in comp.already_canonical:
        if change.pr is not None:
            roles[change.pr].add("already_canonical")
    for closed in comp.closed:
        roles[closed.pr].add("closed")
    for entry in comp.superseding():
        for number in entry.supersedes:
            roles[number].add("superseded")
    for excl in loaded.manifest.exclusions:
        if excl.pr is not None and excl.component == name:
            roles[excl.pr].add("excluded")
    return {n: sorted(r) for n, r in sorted(roles.items())}


def _record(number: int, roles: list[PRRole], facts: PullFacts | None) -> ForgePR:
    if facts is None:
        return ForgePR(number=number, roles=roles, found=False)
    return ForgePR(
        number=number,
        roles=roles,
        title=facts.title,
        state=facts.state,
        draft=facts.draft,
        base_ref=facts.base_ref or None,
        head_sha=facts.head_sha or None,
        merged_at=facts.merged_at,
        merge_commit_sha=facts.merge_commit_sha,
        updated_at=facts.updated_at,
    )


def read_forge(
    loaded: LoadedManifest,
    *,
    forges: ForgeOpener,
    use_forge: bool = True,
    branches: dict[str, str] | None = None,
) -> ForgeData:
    """The forge's facts for every git component that names pull requests.

    ``forges`` (made by the command) opens the client of an API URL, with its token and ETag cache;
    each API URL's client is opened once per read, none with ``use_forge`` off. ``ForgeFailed``
    (a rate limit past the bound, a refused token, 5xx after retries) is
    raised: a lock must not silently lose what it could have read. An unreachable forge
    is recorded as absent, as ``--no-forge`` is. ``branches``: each component's canonical
    branch as locked (what planned PRs must target unless ``forge.base_branch`` says otherwise).
    """
    opened = _Forges(forges)
    components: dict[str, ForgeComponent] = {}
    for name, comp in loaded.manifest.git_components().items():
        prs = named_prs(name, comp, loaded)
        if not prs:
            continue
        spec = comp.forge
        base_branch = (
            (spec.base_branch if spec else None) or (branches or {}).get(name) or comp.canonical_branch
        )
        where = locate(comp.repo, spec.api_url if spec else None, spec.repo if spec else None)
        if not use_forge:
            components[name] = ForgeComponent(status="absent", reason="--no-forge", base_branch=base_branch)
            continue
        if where is None:
            components[name] = ForgeComponent(
                status="absent",
                reason="the repository is not on github.com and the manifest gives no forge: block",
                base_branch=base_branch,
            )
            continue
        if where.api_url in opened.down:
            components[name] = ForgeComponent(
                status="absent",
                reason=opened.down[where.api_url],
                api_url=where.api_url,
                repo=where.repo,
                base_branch=base_branch,
            )
            continue
        components[name] = _read_pulls(where, prs, base_branch, opened)
    return ForgeData(components=components)


@dataclass(frozen=True)
class _Forges:
    """The forges one run asks: how a client is opened, one client per API URL, and why each forge
    that did not answer did not (it is asked once per run)."""

    opener: ForgeOpener
    clients: dict[str, GitHubForge] = field(default_factory=dict)
    down: dict[str, str] = field(default_factory=dict)  # api_url -> why it did not answer


def _read_pulls(
    where: ForgeLocation, prs: dict[int, list[PRRole]], base_branch: str | None, forges: _Forges
) -> ForgeComponent:
    """One component's pull requests from its forge; a forge that does not answer is absent (and not asked again)."""
    client = forges.clients.get(where.api_url)
    if client is None:
        client = forges.clients[where.api_url] = forges.opener(where.api_url)
    try:
        read = client.pulls(where.owner, where.name, prs)
    except ForgeUnreachable as exc:
        forges.down[where.api_url] = str(exc)
        return ForgeComponent(
            status="absent",
            reason=str(exc),
            api_url=where.api_url,
            repo=where.repo,
            base_branch=base_branch,
        )
    return ForgeComponent(
        status="read",
        api_url=where.api_url,
        repo=where.repo,
        base_branch=base_branch,
        pull_requests=[_record(n, roles, read.found.get(n)) for n, roles in prs.items()],
    )
