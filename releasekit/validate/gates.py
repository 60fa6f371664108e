"""Gates: a receipt metric held to a bound, or to a baseline as a ratio with run-to-run noise.

A performance number from one run moves by a few percent by chance. A ratio gate is
therefore judged on the confidence bound of k runs (t-interval), and an accuracy on its
Wilson bound, so that a good release is not failed by noise and a real regression of
the size the gate guards against is not passed by luck.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.findings import Findings
from releasekit.manifest.validation import Baseline, Gate
from releasekit.records.receipt import GateResult, Metric
from releasekit.validate.stats import t_interval


class BaselineValues(BaseModel):
    name: str
    values: dict[str, float] = Field(default_factory=dict)
    problem: str | None = None


def receipt_values(path: Path) -> dict[str, float]:
    """Every number a receipt file holds: ours (its metrics) or today's tool's (its ``evidence``).

    ``records.receipt.receipt_values`` reads it (the file's own marker says which it is);
    ``InputError`` (one line) for a file that is neither.
    """
    from releasekit.records.receipt import receipt_values as read_values

    return read_values(path)


def resolve_baseline(name: str, baseline: Baseline, manifest_dir: Path) -> BaselineValues:
    """Values from the manifest, overlaid on those of a baseline receipt when one is named.

    ``receipt_metrics`` renames the receipt's numbers to ours (a receipt of today's tool
    names them after its own profiles); a mapped name the receipt lacks stays unavailable.
    """
    values: dict[str, float] = {}
    if baseline.receipt is not None:
        path = manifest_dir / baseline.receipt
        if not path.is_file():
            return BaselineValues(
                name=name,
                values=dict(baseline.values),
                problem=f"baseline receipt {baseline.receipt} does not exist",
            )
        try:
            found = receipt_values(path)
        except Exception as exc:  # noqa: BLE001 - a broken baseline is reported on the gate, not fatal
            return BaselineValues(name=name, values=dict(baseline.values), problem=str(exc))
        values.update(found)
        for ours, theirs in baseline.receipt_metrics.items():
            if theirs in found:
                values[ours] = found[theirs]
    values.update(baseline.values)
    return BaselineValues(name=name, values=values)


def _bounds(m: Metric) -> tuple[float, float, float, int]:
    """(point, low, high, runs): the metric's own bounds (Wilson) win, else a t-interval of its samples."""
    samples = m.samples or ([m.value] if m.value is not None else [])
    interval = t_interval(samples)
    low = m.low if m.low is not None else interval.low
    high = m.high if m.high is not None else interval.high
    point = m.value if m.value is not None else interval.mean
    return point, low, high, len(samples)


def evaluate_gate(
    gate: Gate, metrics: dict[str, Metric], baselines: dict[str, BaselineValues]
) -> tuple[GateResult, Findings]:
    findings = Findings()
    m = metrics.get(gate.metric)
    if m is None or (m.value is None and not m.samples):
        findings.add("GATE_METRIC_MISSING", f"gate on {gate.metric}: the cell produced no such metric")
        return GateResult(
            metric=gate.metric, passed=False, baseline=gate.baseline, bound="metric missing", note=gate.note
        ), findings
    point, low, high, runs = _bounds(m)
    result = GateResult(
        metric=gate.metric,
        passed=True,
        candidate=point,
        candidate_low=low,
        candidate_high=high,
        runs=runs,
        baseline=gate.baseline,
        bound="",
        note=gate.note,
    )
    if runs < gate.runs:
        findings.add(
            "GATE_TOO_FEW_RUNS", f"gate on {gate.metric} needs {gate.runs} runs, {runs} produced a value"
        )
        result.passed = False
    rules: list[str] = []
    if gate.baseline is not None and not _against_baseline(gate, baselines, result, rules, findings):
        return result, findings
    _against_bounds(gate, result, rules, findings)
    result.bound = "; ".join(rules)
    return result, findings


def _against_baseline(
    gate: Gate,
    baselines: dict[str, BaselineValues],
    result: GateResult,
    rules: list[str],
    findings: Findings,
) -> bool:
    """The ratio rules against the gate's baseline; False when the baseline has no value (judged unavailable)."""
    point, low, high, runs = result.candidate, result.candidate_low, result.candidate_high, result.runs
    assert point is not None and low is not None and high is not None
    base = baselines.get(gate.baseline or "")
    value = base.values.get(gate.metric) if base else None
    if base is None or value is None or value == 0:
        why = (
            base.problem
            if base and base.problem
            else f"baseline '{gate.baseline}' has no value for {gate.metric}"
        )
        findings.add("BASELINE_UNAVAILABLE", f"gate on {gate.metric}: {why}")
        result.passed = False
        result.bound = "baseline unavailable"
        return False
    result.baseline_value = value
    result.ratio = point / value
    if gate.min_ratio is not None:
        result.ratio_low = low / value
        rules.append(f"lower 95% bound of candidate/baseline >= {gate.min_ratio}")
        if result.ratio_low < gate.min_ratio:
            result.passed = False
            findings.add(
                "GATE_BELOW_BASELINE",
                f"{gate.metric}: {point:.4g} (low {low:.4g}, {runs} run(s)) is {result.ratio_low:.4f} of baseline "
                f"'{gate.baseline}' {value:.4g}; the gate needs >= {gate.min_ratio}",
            )
    if gate.max_ratio is not None:
        rules.append(f"upper 95% bound of candidate/baseline <= {gate.max_ratio}")
        if high / value > gate.max_ratio:
            result.passed = False
            findings.add(
                "GATE_ABOVE_BASELINE",
                f"{gate.metric}: {point:.4g} (high {high:.4g}) is {high / value:.4f} of baseline '{gate.baseline}' "
                f"{value:.4g}; the gate allows <= {gate.max_ratio}",
            )
    return True


def _against_bounds(gate: Gate, result: GateResult, rules: list[str], findings: Findings) -> None:
    """The absolute rules: the interval's lower bound above ``min``, its upper bound below ``max``."""
    point, low, high = result.candidate, result.candidate_low, result.candidate_high
    assert point is not None and low is not None and high is not None
    if gate.min is not None:
        rules.append(f"lower 95% bound >= {gate.min}")
        if low < gate.min:
            result.passed = False
            findings.add("GATE_BELOW_MIN", f"{gate.metric}: {point:.4g} (low {low:.4g}) is below {gate.min}")
    if gate.max is not None:
        rules.append(f"upper 95% bound <= {gate.max}")
        if high > gate.max:
            result.passed = False
            findings.add(
                "GATE_ABOVE_MAX", f"{gate.metric}: {point:.4g} (high {high:.4g}) is above {gate.max}"
            )


def accuracy_against_baseline(wilson_low: float, expected: float, rtol: float) -> bool:
    """vLLM's opt-in rule: the one-sided Wilson lower bound must reach expected x (1 - rtol)."""
    return wilson_low >= expected * (1 - rtol)
