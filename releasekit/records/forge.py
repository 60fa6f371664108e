"""What the forge (GitHub, GitHub Enterprise) said about each pull request a manifest names.

It is part of the lock (``Lock.forge``): ``plan lock`` writes it, ``plan check`` and the
release notes read it. Everything in it is what the forge itself returned; no field is
filled in by releasekit. "When it was read" is the forge's own ``updated_at`` of each PR,
not the wall clock, so two locks of the same forge state are byte-identical.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from releasekit.records.base import Strict

Sha1 = Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
PRRole = Literal["planned", "already_canonical", "superseded", "closed", "excluded"]


class ForgePR(Strict):
    """One pull request as the forge returned it (``found: false``: the forge answered 404)."""

    number: int
    roles: list[PRRole]  # why the manifest names it (sorted)
    found: bool = True
    title: str | None = None
    state: Literal["open", "closed", "merged"] | None = None  # merged: closed with merged_at set
    draft: bool | None = None
    base_ref: str | None = None
    head_sha: Sha1 | None = None
    merged_at: str | None = None  # RFC 3339, as the forge gave it
    merge_commit_sha: Sha1 | None = (
        None  # only recorded for a merged PR (GitHub's test-merge commit otherwise)
    )
    updated_at: str | None = None  # the forge's time of the PR's last change: when this state was true


class ForgeComponent(Strict):
    """The forge of one git component: where it was read, or why it was not."""

    status: Literal["read", "absent"]
    reason: str | None = None  # why absent (--no-forge, unreachable, not a GitHub repository)
    api_url: str | None = None
    repo: str | None = None  # owner/name on that forge
    base_branch: str | None = None  # the branch every planned PR must target
    pull_requests: list[ForgePR] = Field(default_factory=list)  # sorted by number


class ForgeData(Strict):
    """Per git component that names pull requests: the forge's facts about them."""

    components: dict[str, ForgeComponent] = Field(default_factory=dict)

    def component(self, name: str) -> ForgeComponent | None:
        return self.components.get(name)
