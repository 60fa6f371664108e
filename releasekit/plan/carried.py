"""Verify ``carries:``: a PR that claims to bring a release-only commit onto canonical really does.

A carried commit must exist in the component's mirror (the release branches are fetched
with every other branch), and the carrying PR must contain a patch-equivalent change:
either one of its own commits has the carried commit's patch-id, or the PR's cumulative
diff (its fork point to its head) restricted to the files the carried commit touches has
that patch-id (the change re-extracted together with other work). Only a verified entry
turns the release-only finding for that commit into information.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from releasekit.git.history import EMPTY_PATCH, diff_patch_id, merge_base, patch_ids
from releasekit.git.mirror import Mirror
from releasekit.manifest.models import GitComponent, PlannedPR
from releasekit.plan.merged import CanonicalHistory


class ComponentFacts(Protocol):
    """What the verification reads of a component (``releasekit.plan.checks.context.ComponentState``)."""

    @property
    def name(self) -> str: ...
    @property
    def comp(self) -> GitComponent: ...
    @property
    def mirror(self) -> Mirror: ...
    @property
    def checked(self) -> str: ...
    @property
    def history(self) -> CanonicalHistory | None: ...
    @property
    def heads(self) -> Mapping[int, str]: ...
    @property
    def pr_patches(self) -> Mapping[int, Mapping[str, str]]: ...
    @property
    def pr_stops(self) -> Mapping[int, str]: ...


Verdict = Literal["verified", "missing", "absent", "unchecked"]


@dataclass(frozen=True)
class CarriedVerdict:
    component: str
    pr: int
    prefix: str  # as written in the manifest
    verdict: Verdict
    commit: str | None = None  # the carried commit, resolved
    evidence: str = ""  # how it was found (or why not)

    @property
    def verified(self) -> bool:
        return self.verdict == "verified"


def _commit_patch_id(cs: ComponentFacts, commit: str) -> str | None:
    """The carried commit's own patch-id (None for a merge or root commit: nothing to compare)."""
    parents = cs.mirror.git.run("rev-list", "--parents", "-n1", commit).split()[1:]
    if len(parents) != 1:
        return None
    return patch_ids(cs.mirror.git, commit, f"^{parents[0]}").get(commit)


def verify_carried(cs: ComponentFacts) -> list[CarriedVerdict]:
    """One verdict per ``carries:`` entry of the component's merge plan."""
    return [_verdict(cs, planned, prefix) for planned in cs.comp.merge_plan for prefix in planned.carries]


def _verdict(cs: ComponentFacts, planned: PlannedPR, prefix: str) -> CarriedVerdict:
    """One ``carries:`` prefix: its own patch first, then the PR's combined change, so a squash still counts."""
    if not cs.mirror.has_commit(prefix):
        return CarriedVerdict(
            cs.name,
            planned.pr,
            prefix,
            "missing",
            evidence=f"no commit {prefix} in {cs.mirror.url}",
        )
    commit = cs.mirror.resolve(prefix)
    head = cs.heads.get(planned.pr)
    if head is None or cs.history is None:
        return CarriedVerdict(
            cs.name,
            planned.pr,
            prefix,
            "unchecked",
            commit,
            f"PR #{planned.pr} has no head to read",
        )
    pid = _commit_patch_id(cs, commit)
    if pid is None or pid == EMPTY_PATCH:
        return CarriedVerdict(
            cs.name,
            planned.pr,
            prefix,
            "absent",
            commit,
            f"{prefix} is a merge, root or empty commit: no change to carry",
        )
    own = cs.pr_patches.get(planned.pr, {})
    twin = next((c for c, p in own.items() if p == pid), None)
    if twin is not None:
        return CarriedVerdict(
            cs.name,
            planned.pr,
            prefix,
            "verified",
            commit,
            f"PR commit {twin[:12]} is patch-equivalent",
        )
    return _combined_verdict(cs, _Claim(planned, prefix, commit, head, pid))


@dataclass(frozen=True)
class _Claim:
    """One ``carries:`` entry, resolved: the PR that claims it, the prefix as written, the carried
    commit, the PR's head and the carried commit's patch-id."""

    planned: PlannedPR
    prefix: str
    commit: str
    head: str
    pid: str


def _combined_verdict(cs: ComponentFacts, claim: _Claim) -> CarriedVerdict:
    """No single PR commit matches: the PR's whole change to the same files may (a squash or a split)."""
    planned, prefix, commit, head, pid = claim.planned, claim.prefix, claim.commit, claim.head, claim.pid
    git = cs.mirror.git
    files = [
        f
        for f in git.run(
            "diff-tree", "--no-commit-id", "--name-only", "-r", "--no-renames", commit
        ).splitlines()
        if f
    ]
    stop = cs.pr_stops.get(planned.pr) or cs.checked
    base = merge_base(git, head, stop)
    if base and files and diff_patch_id(git, base, head, files) == pid:
        return CarriedVerdict(
            cs.name,
            planned.pr,
            prefix,
            "verified",
            commit,
            f"the PR's change to {', '.join(files)} is patch-equivalent",
        )
    return CarriedVerdict(
        cs.name,
        planned.pr,
        prefix,
        "absent",
        commit,
        f"no commit of PR #{planned.pr} and not its combined change to {', '.join(files) or 'those files'} "
        f"is patch-equivalent to {commit[:12]}",
    )
