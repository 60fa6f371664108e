"""The counts the release plan states (``passed >= 366``, ``skipped == 714``) hold for the run."""

from __future__ import annotations

import operator
from collections.abc import Callable

from releasekit.findings import Findings
from releasekit.manifest.testing import parse_count_rule
from releasekit.records.test_receipt import CountRuleResult, Counts
from releasekit.suites.context import SuiteContext

_OPS: dict[str, Callable[[int, int], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}


def evaluate_rules(rules: list[str], counts: Counts) -> list[CountRuleResult]:
    out = []
    for rule in rules:
        key, op, want = parse_count_rule(rule)
        actual = counts.get(key)
        out.append(CountRuleResult(rule=rule, actual=actual, ok=_OPS[op](actual, want)))
    return out


class CountRulesCheck:
    name = "count-rules"
    codes: tuple[str, ...] = ("COUNT_RULE_FAILED",)

    def run(self, ctx: SuiteContext) -> Findings:
        found = Findings()
        if ctx.receipt.status in ("skipped", "timed-out"):
            return found
        for result in evaluate_rules(list(ctx.suite.expect), ctx.receipt.counts):
            if not result.ok:
                key = result.rule.split()[0]
                found.add(
                    "COUNT_RULE_FAILED",
                    f"expected {result.rule}; {key} = {result.actual}",
                    component=ctx.component,
                    field=f"tests.{ctx.suite.name}.expect",
                )
        return found
