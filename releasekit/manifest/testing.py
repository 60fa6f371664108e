"""Manifest schema for the test stage: a component's test suites and its source hygiene.

``tests:`` lists suites that run inside the candidate image (see docs/test.md): how to
run them (a pytest selection, or any command that writes JUnit XML), what they need
(GPUs, device files), the counts the release plan states (``passed >= 366``), a
timeout, the baseline that failures are judged against, and an allowlist of accepted
pre-existing failures. ``hygiene:`` lists the linters run on the composed tree, at the
versions pinned here.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

_RULE = re.compile(r"^\s*(passed|failed|skipped|errors|total)\s*(>=|<=|==|>|<)\s*([0-9]{1,9})\s*$")
_SUITE_NAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def parse_count_rule(text: str) -> tuple[str, str, int]:
    """``"passed >= 366"`` -> ("passed", ">=", 366); ValueError when it is not a rule."""
    match = _RULE.match(text)
    if not match:
        raise ValueError(f"not a count rule: {text!r} (expected e.g. 'passed >= 366' or 'skipped == 714')")
    return match.group(1), match.group(2), int(match.group(3))


def _count_rule(value: str) -> str:
    parse_count_rule(value)
    return " ".join(value.split())


CountRule = Annotated[str, AfterValidator(_count_rule)]


class PytestSelection(_Strict):
    """Which tests pytest runs: paths in the component's repository, ``-k``, ``-m``, extra arguments."""

    paths: list[str] = Field(
        min_length=1, description="test files or directories, relative to the repository root"
    )
    k: str | None = Field(default=None, description="pytest -k expression")
    markers: str | None = Field(default=None, description="pytest -m expression")
    args: list[str] = Field(default_factory=list, description="further pytest arguments")


class CommandRun(_Strict):
    """Any command that writes a JUnit XML report (run in the image; the report is collected)."""

    argv: list[str] = Field(min_length=1)
    junit: str = Field(min_length=1, description="absolute path of the JUnit XML report inside the container")


class SuiteNeeds(_Strict):
    gpus: int = Field(default=0, ge=0, le=64, description="GPUs the suite needs; fewer on the host: skipped")
    devices: list[str] = Field(
        default_factory=list, description="host device files the suite needs, e.g. /dev/infiniband/uverbs0"
    )


class AllowedFailure(_Strict):
    """A named failure accepted as pre-existing, with the reason and the date the acceptance ends."""

    test: str = Field(min_length=1, description="the test id (pytest node id)")
    reason: str = Field(min_length=1)
    expires: dt.date


class TestSuite(_Strict):
    __test__ = False  # not a pytest class

    name: str = Field(pattern=_SUITE_NAME)
    description: str | None = None
    pytest: PytestSelection | None = None
    command: CommandRun | None = None
    files: list[str] = Field(
        default_factory=list, description="further paths of the repository the tests read (fixtures, data)"
    )
    python: str = Field(default="python3", description="the image's interpreter")
    workdir: str | None = Field(
        default=None, description="without a lock: where the tests are inside the image"
    )
    env: dict[str, str] = Field(default_factory=dict)
    needs: SuiteNeeds = Field(default_factory=SuiteNeeds)
    expect: list[CountRule] = Field(default_factory=list, description="count rules, e.g. 'passed >= 366'")
    timeout: float = Field(default=1800, gt=0, le=86_400, description="seconds before the suite is killed")
    baseline: str | None = Field(
        default=None,
        description="image reference or digest that failures are rerun on; 'canonical': an image of the canonical "
        "branch without the plan (given with --baseline-image)",
    )
    allowlist: list[AllowedFailure] = Field(default_factory=list)
    required: bool = Field(default=True, description="the publish gate requires this suite's receipt to pass")
    note: str | None = None

    @model_validator(mode="after")
    def _one_runner(self) -> TestSuite:
        if (self.pytest is None) == (self.command is None):
            raise ValueError("a suite has exactly one of 'pytest' or 'command'")
        return self


def _unique_suites(suites: list[TestSuite]) -> list[TestSuite]:
    seen: set[str] = set()
    for suite in suites:
        if suite.name in seen:
            raise ValueError(f"suite name {suite.name!r} appears twice")
        seen.add(suite.name)
    return suites


TestSuites = Annotated[list[TestSuite], AfterValidator(_unique_suites)]

HygieneStepName = Literal["ruff-check", "ruff-format", "git-diff-check", "pre-commit"]


class Hygiene(_Strict):
    """Linters on the composed tree: on the files the plan changes (``scope: changed``) or on all files."""

    scope: Literal["changed", "all"] = "changed"
    steps: list[HygieneStepName] = Field(min_length=1)
    tools: dict[Literal["ruff", "pre-commit", "prek"], str] = Field(
        default_factory=dict, description="pinned versions of the tools the steps run (from PyPI)"
    )
    hook_runner: Literal["pre-commit", "prek"] = "pre-commit"
    ruff_args: list[str] = Field(default_factory=list, description="e.g. ['--select', 'E,F']")
    required: bool = Field(
        default=True,
        description="the publish gate requires every step passed for this component; false: its problems are warnings",
    )

    @model_validator(mode="after")
    def _pinned(self) -> Hygiene:
        if ("ruff-check" in self.steps or "ruff-format" in self.steps) and "ruff" not in self.tools:
            raise ValueError("ruff steps need tools.ruff pinned (e.g. ruff: 0.6.9)")
        if "pre-commit" in self.steps and self.hook_runner not in self.tools:
            raise ValueError(f"the pre-commit step needs tools.{self.hook_runner} pinned")
        if len(set(self.steps)) != len(self.steps):
            raise ValueError("a hygiene step is listed twice")
        return self
