"""``plan-check.json``: the result of ``plan check`` (with its folded audits), read by publish."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from releasekit.findings import Findings, Severity
from releasekit.records.base import Record, Strict

# The release-only audit's report, embedded here; its own module so that ``audit
# release-only`` does not build every plan-check model (start-up, docs/benchmarks.md).
from releasekit.records.release_only import (  # noqa: F401 - re-exported
    ReleaseOnlyCommit,
    ReleaseOnlyReport,
    UpstreamEntry,
    UpstreamOrigin,
)

PLAN_CHECK_FILE: Final = "plan-check.json"
PLAN_CHECK_SCHEMA: Final = "releasekit.plan-check/v1"

MergeHow = Literal["ancestry", "patch-id", "squash"]
# How a merged PR actually arrived on the canonical branch: its own merge commit, a
# fast-forward to its head, a squash commit, rebased/cherry-picked commits, or inside
# another PR's merge (``arrived_inside`` names it when that PR is one the manifest names).
Arrival = Literal["merge", "fast-forward", "squash", "rebase", "inside"]


class PRStatus(Strict):
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
    arrival: Arrival | None = None  # how it arrived (merged PRs)
    arrived_inside: int | None = None  # arrival "inside": the PR whose merge brought it
    arrival_acknowledged: bool = False  # "inside" as the manifest's `arrived_in` says
    codes: list[str] = Field(default_factory=list)


class ComponentCheck(Strict):
    component: str
    repo: str
    canonical_branch: str
    checked_commit: str  # the commit whose history was checked (lock commit, pin or canonical head)
    canonical_head: str
    statuses: list[PRStatus] = Field(default_factory=list)


class PlanCheckResult(Record):
    """plan-check.json: what ``plan check --json`` prints for a manifest (and lock)."""

    kind = "plan-check result"

    schema_: Literal["releasekit.plan-check/v1"] = Field(default=PLAN_CHECK_SCHEMA, alias="schema")
    passed: bool
    manifest_sha256: str
    lock_sha256: str | None = None
    components: list[ComponentCheck] = Field(default_factory=list)
    # Release refs (and --release COMPONENT=REF) and pin audits (components with `pin_inputs`,
    # --pins COMPONENT, --pins-repo DIR): the audits, folded into one gate result.
    release_only: list[ReleaseOnlyReport] = Field(default_factory=list)
    pins: list[PinAuditResult] = Field(default_factory=list)
    findings: Findings = Field(default_factory=Findings)

    def error_codes(self) -> list[str]:
        return [f.code for f in self.findings if f.severity == Severity.error]


class PinOccurrence(Strict):
    file: str
    line: int
    package: str
    found: str  # the text as written, e.g. "==0.1.11", ">=0.1", "" (unpinned)
    expected: str
    agrees: bool
    scope: Literal["build", "runtime", "release"]


class SkippedPinInput(Strict):
    """A release input left out by the manifest's ``pin_inputs.skip`` (the pattern and its reason)."""

    file: str
    pattern: str
    reason: str


class PinAuditResult(Strict):
    """``audit pins`` over one commit's tree, read through git objects."""

    repo: str
    component: str | None = None  # the manifest's git component whose commit was read
    commit: str
    files_scanned: int
    files: list[str] = Field(default_factory=list)  # the inputs read, sorted
    skipped: list[SkippedPinInput] = Field(default_factory=list)  # out of scope, sorted by file
    occurrences: list[PinOccurrence] = Field(default_factory=list)
    passed: bool
    findings: Findings = Field(default_factory=Findings)


PlanCheckResult.model_rebuild()
