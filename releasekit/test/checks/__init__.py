"""The test stage's checks: one small object per concern, each with its own finding codes.

A check has a ``name``, the ``codes`` it may report, and ``run(ctx) -> Findings``; the
suite checks read a ``SuiteContext``, the hygiene checks a ``HygieneContext``.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from releasekit.findings import Findings

C = TypeVar("C", contravariant=True)


class Check(Protocol[C]):
    name: str
    codes: tuple[str, ...]

    def run(self, ctx: C) -> Findings: ...


def suite_checks() -> list[Check]:  # type: ignore[type-arg]
    from releasekit.test.checks.allowlist import AllowlistCheck
    from releasekit.test.checks.counts import CountRulesCheck
    from releasekit.test.checks.flaky import FlakyCheck
    from releasekit.test.checks.regressions import RegressionCheck
    from releasekit.test.checks.suite_run import SuiteRunCheck

    return [SuiteRunCheck(), RegressionCheck(), FlakyCheck(), AllowlistCheck(), CountRulesCheck()]


def hygiene_checks() -> dict[str, Check]:  # type: ignore[type-arg]
    """One check per hygiene step name of the manifest."""
    from releasekit.test.checks.diff_check import DiffCheck
    from releasekit.test.checks.hooks import HooksCheck
    from releasekit.test.checks.ruff import RuffCheck
    from releasekit.test.checks.ruff_format import RuffFormatCheck

    return {"ruff-check": RuffCheck(), "ruff-format": RuffFormatCheck(), "git-diff-check": DiffCheck(),
            "pre-commit": HooksCheck()}
