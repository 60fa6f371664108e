"""What the test stage's checks read. Checks judge; they never change these."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from releasekit.manifest.testing import Hygiene, TestSuite
from releasekit.records.test_receipt import TestReceipt
from releasekit.suites.hook_sandbox import HookSandbox


@dataclass(frozen=True)
class SuiteContext:
    component: str
    suite: TestSuite
    receipt: TestReceipt  # counts, failures with their verdicts, how the run ended
    today: dt.date


@dataclass(frozen=True)
class HygieneContext:
    component: str
    tree: Path  # the composed work tree (a git checkout)
    base: str  # commit the plan is composed onto
    head: str  # the composed commit
    files: list[str]  # repository-relative paths in scope (changed by the plan, or all)
    hygiene: Hygiene
    tools: dict[str, Path] = field(default_factory=dict)  # tool name -> executable at the pinned version
    hooks: HookSandbox | None = None  # where the repository's hooks run (a pre-commit step only)
