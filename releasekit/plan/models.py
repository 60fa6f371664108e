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
    planned: int = 0  # PRs of the merge plan; each is a step, or a PR_MISSING finding (no head)
    steps: list[ComposeStep] = Field(default_factory=list)
    tree: str | None = None  # the tree after every planned PR is merged
    expected_tree: str | None = None  # from the lock
    matches_lock: bool | None = None

    def counts(self) -> str:
        """How many planned PRs merged, and what became of the others, in words."""
        done = {
            r: sum(1 for s in self.steps if s.result == r)
            for r in ("merged", "already-contained", "conflict")
        }
        missing = self.planned - len(self.steps)
        parts = [
            f"{done['already-contained']} already on the base" if done["already-contained"] else "",
            f"{done['conflict']} conflicting" if done["conflict"] else "",
            f"{missing} without a head" if missing > 0 else "",
        ]
        rest = ", ".join(p for p in parts if p)
        return f"{done['merged']} of {self.planned} planned PRs merged" + (f" ({rest})" if rest else "")


class ComposeResult(_Model):
    passed: bool
    lock_sha256: str | None = None
    components: list[ComponentCompose] = Field(default_factory=list)
    findings: Findings = Field(default_factory=Findings)
