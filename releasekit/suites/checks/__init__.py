"""The test stage's checks: one small object per concern, each with its own finding codes.

Each is a ``releasekit.checks.Check`` (the one check shape): a ``name``, the ``codes`` it
may report, and ``run(ctx) -> Findings``. The suite checks read a ``SuiteContext`` and run
in order through ``AllOf``; the hygiene checks read a ``HygieneContext``, one per hygiene
step name of the manifest.
"""

from __future__ import annotations

from releasekit.checks import AllOf, Check
from releasekit.suites.context import HygieneContext, SuiteContext


def suite_checks() -> AllOf[SuiteContext]:
    from releasekit.suites.checks.allowlist import AllowlistCheck
    from releasekit.suites.checks.counts import CountRulesCheck
    from releasekit.suites.checks.flaky import FlakyCheck
    from releasekit.suites.checks.regressions import RegressionCheck
    from releasekit.suites.checks.suite_run import SuiteRunCheck

    return AllOf(
        SuiteRunCheck(), RegressionCheck(), FlakyCheck(), AllowlistCheck(), CountRulesCheck(), name="suite"
    )


def hygiene_checks() -> dict[str, Check[HygieneContext]]:
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
