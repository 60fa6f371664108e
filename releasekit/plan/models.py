"""Results of the plan stage that are not files of the release directory: what ``plan compose`` returns.

``plan check`` and the audits return ``releasekit.records.plan_check`` models (plan-check.json).
Commands render these; services never print.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from releasekit.findings import Findings


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
