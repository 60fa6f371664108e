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
    from releasekit.suites.checks.allowlist import AllowlistCheck
    from releasekit.suites.checks.counts import CountRulesCheck
    from releasekit.suites.checks.flaky import FlakyCheck
    from releasekit.suites.checks.regressions import RegressionCheck
    from releasekit.suites.checks.suite_run import SuiteRunCheck

    return [SuiteRunCheck(), RegressionCheck(), FlakyCheck(), AllowlistCheck(), CountRulesCheck()]


def hygiene_checks() -> dict[str, Check]:  # type: ignore[type-arg]
    """One check per hygiene step name of the manifest."""
    from releasekit.suites.checks.diff_check import DiffCheck
    from releasekit.suites.checks.hooks import HooksCheck
    from releasekit.suites.checks.ruff import RuffCheck
    from releasekit.suites.checks.ruff_format import RuffFormatCheck

    return {
        "ruff-check": RuffCheck(),
        "ruff-format": RuffFormatCheck(),
        "git-diff-check": DiffCheck(),
        "pre-commit": HooksCheck(),
    }
