"""Results of the plan stage: what ``plan check``, ``plan compose`` and the audits return.

Commands render these; services never print.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from releasekit.findings import Findings

MergeHow = Literal["ancestry", "patch-id", "squash"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PRStatus(_Model):
    """One pull request (or named change) as found on the canonical branch."""

    component: str
    pr: int | None = None
    commit: str | None = None  # for changes named by commit
    role: Literal["planned", "superseded", "closed", "already_canonical", "excluded"]
    title: str | None = None
    head: str | None = None
    state: Literal["merged", "not-merged", "partial", "present", "absent", "unknown"]
    how: MergeHow | None = None
    landed_at: str | None = None  # the first-parent commit of canonical that brought it in
    landed_position: int | None = None  # index of that commit in canonical's first-parent history
    landed_time: int | None = None  # its committer time (cross-component order)
    codes: list[str] = Field(default_factory=list)


class ComponentCheck(_Model):
    component: str
    repo: str
    canonical_branch: str
    checked_commit: str  # the commit whose history was checked (lock commit, pin or canonical head)
    canonical_head: str
    statuses: list[PRStatus] = Field(default_factory=list)


class PlanCheckResult(_Model):
    schema_: Literal["releasekit.plan-check/v1"] = Field(default="releasekit.plan-check/v1", alias="schema")
    passed: bool
    manifest_sha256: str
    lock_sha256: str | None = None
    components: list[ComponentCheck] = Field(default_factory=list)
    # With --release COMPONENT=REF / --pins-repo DIR: the audits, folded into one gate result.
    release_only: list[ReleaseOnlyReport] = Field(default_factory=list)
    pins: PinAuditResult | None = None
    findings: Findings = Field(default_factory=Findings)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ComposeStep(_Model):
    pr: int
    head: str
    result: Literal["merged", "already-contained", "conflict"]
    conflicts: list[str] = Field(default_factory=list)
    tree: str | None = None  # tree after this step


class ComponentCompose(_Model):
    component: str
    repo: str
    base: str
    steps: list[ComposeStep] = Field(default_factory=list)
    tree: str | None = None  # the tree after every planned PR is merged
    expected_tree: str | None = None  # from the lock
    matches_lock: bool | None = None


class ComposeResult(_Model):
    passed: bool
    lock_sha256: str | None = None
    components: list[ComponentCompose] = Field(default_factory=list)
    findings: Findings = Field(default_factory=Findings)


class ReleaseOnlyCommit(_Model):
    commit: str
    subject: str
    kind: Literal["commit", "merge-resolution"] = "commit"
    carried_by: int | None = None  # the merged PR whose `carries:` names it


class ReleaseOnlyReport(_Model):
    repo: str
    release: str
    canonical: str
    release_commit: str
    canonical_commit: str
    examined: int  # commits on the release side not reachable from canonical
    equivalent: int  # of those, how many have a patch-equivalent on canonical
    release_only: list[ReleaseOnlyCommit] = Field(default_factory=list)
    passed: bool
    findings: Findings = Field(default_factory=Findings)


class PinOccurrence(_Model):
    file: str
    line: int
    package: str
    found: str  # the text as written, e.g. "==0.1.11", ">=0.1", "" (unpinned)
    expected: str
    agrees: bool
    scope: Literal["build", "runtime", "release"]


class PinAuditResult(_Model):
    root: str
    files_scanned: int
    occurrences: list[PinOccurrence] = Field(default_factory=list)
    passed: bool
    findings: Findings = Field(default_factory=Findings)


PlanCheckResult.model_rebuild()
