"""Gates: a receipt metric held to a bound, or to a baseline as a ratio with run-to-run noise.

A performance number from one run moves by a few percent by chance. A ratio gate over k runs is
therefore judged on the one-sided 95 % bound of candidate/baseline (Fieller's, which counts the
baseline's own runs where it has them), an accuracy on its Wilson bound, and one run as a point
comparison (no bound). Each k-run gate records its power at the measured variation: the smallest
regression it detects, its false-failure rate, and ``GATE_UNDERPOWERED`` when it cannot detect
the regression it guards (docs/validate.md, *Gate statistics*).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from releasekit.findings import Findings
from releasekit.manifest.gate_power import (
    CONFIDENCE,
    MAX_RUNS,
    Design,
    detectable_regression,
    gate_fail_probability,
    runs_for_regression,
    t_quantile,
)
from releasekit.manifest.validation import Baseline, Gate
from releasekit.records.receipt import GatePower, GateResult, Metric, SampleSummary, host_kind
from releasekit.validate.stats import fieller, t_interval


class BaselineValues(BaseModel):
    """A baseline's numbers; ``samples`` holds the runs behind a value taken from one of our receipts
    (two or more), ``from_receipt`` the names whose value a receipt gave (the rest: the manifest's)."""

    name: str
    values: dict[str, float] = Field(default_factory=dict)
    samples: dict[str, list[float]] = Field(default_factory=dict)
    from_receipt: set[str] = Field(default_factory=set)
    problem: str | None = None
    # A baseline from an earlier receipt: the file as the manifest names it, and the host it names.
    receipt: str | None = None
    host: dict[str, str] | None = None
    # A baseline measured beside the candidate: its runs of each metric in the order they ran, paired
    # with the candidate's (run i of each side adjacent in time), and what served it.
    paired: dict[str, list[float]] = Field(default_factory=dict)
    image: str | None = None
    image_id: str | None = None
    cell: str | None = None
    order: list[str] = Field(default_factory=list)

    def kind(self, metric: str) -> Literal["samples", "receipt", "manifest", "interleaved"]:
        if metric in self.paired:
            return "interleaved"
        if len(self.samples.get(metric, [])) >= 2:
            return "samples"
        return "receipt" if metric in self.from_receipt else "manifest"


def receipt_values(path: Path) -> dict[str, float]:
    """Every number a receipt file holds: ours (its metrics) or today's tool's (its ``evidence``).

    ``records.receipt.receipt_values`` reads it (the file's own marker says which it is);
    ``InputError`` (one line) for a file that is neither.
    """
    from releasekit.records.receipt import receipt_values as read_values

    return read_values(path)


def receipt_samples(path: Path) -> dict[str, list[float]]:
    """The runs behind each repeated metric of one of our receipts ({} for today's tool's)."""
    from releasekit.records.receipt import receipt_samples as read_samples

    return read_samples(path)


def resolve_baseline(name: str, baseline: Baseline, manifest_dir: Path) -> BaselineValues:
    """Values from the manifest, overlaid on those of a baseline receipt when one is named.

    ``receipt_metrics`` renames the receipt's numbers to ours (a receipt of today's tool
    names them after its own profiles); a mapped name the receipt lacks stays unavailable.
    """
    values: dict[str, float] = {}
    samples: dict[str, list[float]] = {}
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
            runs = receipt_samples(path)
            host = receipt_host(path)
        except Exception as exc:  # noqa: BLE001 - a broken baseline is reported on the gate, not fatal
            return BaselineValues(name=name, values=dict(baseline.values), problem=str(exc))
        values.update(found)
        samples.update(runs)
        for ours, theirs in baseline.receipt_metrics.items():
            if theirs in found:
                values[ours] = found[theirs]
            if theirs in runs:
                samples[ours] = runs[theirs]
    from_receipt = set(values) - set(baseline.values)
    values.update(baseline.values)
    samples = {k: v for k, v in samples.items() if k in from_receipt}
    if baseline.receipt is None:
        return BaselineValues(name=name, values=values)
    return BaselineValues(
        name=name,
        values=values,
        samples=samples,
        from_receipt=from_receipt,
        receipt=baseline.receipt,
        host=host,
    )


def receipt_host(path: Path) -> dict[str, str] | None:
    """The host one of our receipts names (None: today's tool's, which names none)."""
    from releasekit.records.receipt import receipt_host as read_host

    return read_host(path)


Test = Literal["point", "metric-bound", "t-one-sided-95", "fieller-one-sided-95", "paired-t-one-sided-95"]


def _summary(samples: list[float]) -> SampleSummary:
    """n, mean, sd and the two-sided 95 % t-interval of some runs (one run: no sd, no interval)."""
    iv = t_interval(samples)
    if iv.n < 2:
        return SampleSummary(n=1, mean=iv.mean)
    return SampleSummary(n=iv.n, mean=iv.mean, sd=iv.stdev, low=iv.low, high=iv.high)


def _candidate_side(m: Metric) -> tuple[Test, SampleSummary, float | None, float | None]:
    """(test, summary, low, high): k runs give one-sided 95 % t-bounds of their mean, a metric's own (Wilson)
    bounds are used as they are, and one value is a point (no bound)."""
    samples = m.samples or ([m.value] if m.value is not None else [])
    stats = _summary(samples)
    if stats.sd is not None:
        half = t_quantile(CONFIDENCE, stats.n - 1) * stats.sd / math.sqrt(stats.n)
        return "t-one-sided-95", stats, stats.mean - half, stats.mean + half
    if m.low is not None or m.high is not None:
        return "metric-bound", stats, m.low, m.high
    return "point", stats, None, None


def evaluate_gate(
    gate: Gate,
    metrics: dict[str, Metric],
    baselines: dict[str, BaselineValues],
    *,
    host: dict[str, str] | None = None,
) -> tuple[GateResult, Findings]:
    """The gate over the cell's metrics; ``host``: the host measuring now (a receipt baseline from
    another kind of host is ``BASELINE_OTHER_HOST``)."""
    findings = Findings()
    m = metrics.get(gate.metric)
    if m is None or (m.value is None and not m.samples):
        findings.add("GATE_METRIC_MISSING", f"gate on {gate.metric}: the cell produced no such metric")
        return GateResult(
            metric=gate.metric, passed=False, baseline=gate.baseline, bound="metric missing", note=gate.note
        ), findings
    test, stats, low, high = _candidate_side(m)
    result = GateResult(
        metric=gate.metric,
        passed=True,
        candidate=m.value if m.value is not None else stats.mean,
        candidate_low=low,
        candidate_high=high,
        runs=stats.n,
        baseline=gate.baseline,
        bound="",
        note=gate.note,
        test=test,
        candidate_stats=stats,
    )
    if stats.n < gate.runs:
        findings.add(
            "GATE_TOO_FEW_RUNS", f"gate on {gate.metric} needs {gate.runs} runs, {stats.n} produced a value"
        )
        result.passed = False
    rules: list[str] = []
    if gate.baseline is not None:
        base = baselines.get(gate.baseline)
        cand = m.samples or ([m.value] if m.value is not None else [])
        if not _against_baseline(gate, base, result, cand=cand, rules=rules, findings=findings):
            return result, findings
        assert base is not None
        _baseline_host(gate, base, host, result, findings)
    _against_bounds(gate, result, rules, findings)
    result.bound = "; ".join(rules)
    return result, findings


def _against_baseline(
    gate: Gate,
    base: BaselineValues | None,
    result: GateResult,
    *,
    cand: list[float],
    rules: list[str],
    findings: Findings,
) -> bool:
    """The ratio rules against the gate's baseline; False when the baseline has no value (judged unavailable)."""
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
    kind = base.kind(gate.metric)
    result.baseline_kind = kind
    if kind == "interleaved":
        return _paired_test(gate, base, result, cand=cand, rules=rules, findings=findings)
    result.baseline_stats = (
        _summary(base.samples[gate.metric]) if kind == "samples" else SampleSummary(n=1, mean=value)
    )
    result.baseline_value = value
    assert result.candidate is not None
    result.ratio = result.candidate / value
    if result.test == "t-one-sided-95":
        _ratio_test(gate, result, rules, findings)
    else:
        _fixed_ratio(gate, result, rules, findings)
    return True


def _fixed_ratio(gate: Gate, result: GateResult, rules: list[str], findings: Findings) -> None:
    """One run (a point comparison, no bound) or a metric with its own bound, over the baseline's value."""
    point, value = result.candidate, result.baseline_value
    assert point is not None and value is not None
    low = result.candidate_low if result.candidate_low is not None else point
    high = result.candidate_high if result.candidate_high is not None else point
    is_point = result.test == "point"
    shown = f"{point:.4g} (1 run: no bound)" if is_point else f"{point:.4g} (low {low:.4g})"
    if gate.min_ratio is not None:
        if not is_point:
            result.ratio_low = low / value
        rules.append(
            f"candidate/baseline >= {gate.min_ratio} (1 run: point comparison, no bound)"
            if is_point
            else f"lower 95% bound of candidate/baseline >= {gate.min_ratio}"
        )
        if low / value < gate.min_ratio:
            _below(gate, result, findings, f"{shown} is {low / value:.4f}")
    if gate.max_ratio is not None:
        rules.append(
            f"candidate/baseline <= {gate.max_ratio} (1 run: point comparison, no bound)"
            if is_point
            else f"upper 95% bound of candidate/baseline <= {gate.max_ratio}"
        )
        if high / value > gate.max_ratio:
            _above(gate, result, findings, f"{point:.4g} (high {high:.4g}) is {high / value:.4f}")


def _below(gate: Gate, result: GateResult, findings: Findings, what: str) -> None:
    result.passed = False
    findings.add(
        "GATE_BELOW_BASELINE",
        f"{gate.metric}: {what} of baseline '{gate.baseline}' {result.baseline_value:.4g}; "
        f"the gate needs >= {gate.min_ratio}",
    )


def _above(gate: Gate, result: GateResult, findings: Findings, what: str) -> None:
    result.passed = False
    findings.add(
        "GATE_ABOVE_BASELINE",
        f"{gate.metric}: {what} of baseline '{gate.baseline}' {result.baseline_value:.4g}; "
        f"the gate allows <= {gate.max_ratio}",
    )


def _design(result: GateResult) -> Design:
    c, b = result.candidate_stats, result.baseline_stats
    assert c is not None and b is not None and c.sd is not None
    return Design(
        candidate_cv=c.sd / abs(c.mean) if c.mean else c.sd / abs(b.mean),
        candidate_runs=c.n,
        baseline_cv=(b.sd / abs(b.mean)) if b.sd is not None and b.mean else 0.0,
        baseline_runs=b.n,
    )


def _ratio_test(gate: Gate, result: GateResult, rules: list[str], findings: Findings) -> None:
    """k runs: one-sided 95 % Fieller bounds of the ratio of means (t over one number when the baseline has
    no runs), with the gate's power from the measured variation."""
    c, b = result.candidate_stats, result.baseline_stats
    assert c is not None and b is not None and c.sd is not None
    design = _design(result)
    t = design.t_crit()
    bounds = fieller(
        mean_c=c.mean,
        var_c=c.sd**2 / c.n,
        mean_b=b.mean,
        var_b=(b.sd**2 / b.n) if b.sd is not None else 0.0,
        t=t,
    )
    fieller_test = result.baseline_kind == "samples"
    result.test = "fieller-one-sided-95" if fieller_test else "t-one-sided-95"
    how = (
        f"Fieller, {c.n} vs {b.n} runs, Welch df {design.df:.3g}"
        if fieller_test
        else f"t, {c.n} runs against one number"
    )
    if bounds is not None:
        result.ratio_low, result.ratio_high = bounds
    spread = "" if bounds is not None else " (unbounded: the baseline's spread hides its mean)"
    _judge_ratio_bounds(gate, design, result, how=how, spread=spread, rules=rules, findings=findings)


def _judge_ratio_bounds(
    gate: Gate,
    design: Design,
    result: GateResult,
    *,
    how: str,
    spread: str,
    rules: list[str],
    findings: Findings,
) -> None:
    """The ratio's one-sided bounds against the thresholds, then the gate's power at ``design``."""
    c = result.candidate_stats
    assert c is not None
    power = gate_power(gate, design)
    result.gate_power = power
    if gate.min_ratio is not None:
        rules.append(f"one-sided 95% lower bound of candidate/baseline >= {gate.min_ratio} ({how})")
        if result.ratio_low is None or result.ratio_low < gate.min_ratio:
            low = "-inf" if result.ratio_low is None else f"{result.ratio_low:.4f}"
            _below(
                gate,
                result,
                findings,
                f"{c.mean:.4g} ({c.n} runs) has ratio bound {low}{spread}{_weak(power)}",
            )
    if gate.max_ratio is not None:
        rules.append(f"one-sided 95% upper bound of candidate/baseline <= {gate.max_ratio} ({how})")
        if result.ratio_high is None or result.ratio_high > gate.max_ratio:
            high = "inf" if result.ratio_high is None else f"{result.ratio_high:.4f}"
            _above(
                gate,
                result,
                findings,
                f"{c.mean:.4g} ({c.n} runs) has ratio bound {high}{spread}{_weak(power)}",
            )
    if power.underpowered and result.passed:
        result.passed = False
        findings.add("GATE_UNDERPOWERED", f"{gate.metric}: {_underpowered(power, c)}")


def _paired_test(
    gate: Gate,
    base: BaselineValues,
    result: GateResult,
    *,
    cand: list[float],
    rules: list[str],
    findings: Findings,
) -> bool:
    """Runs interleaved with the baseline's: run i of each side ran next to each other, so what the host
    did meanwhile is in both. The gate bounds the mean of log(candidate_i / baseline_i) by a one-sided
    95 % t-bound (n - 1 degrees of freedom) and states the ratio as its exponential (the geometric mean of
    the pairs' ratios); its power is that of a t-test over the pairs' spread."""
    theirs = base.paired[gate.metric]
    result.baseline_image, result.baseline_image_id = base.image, base.image_id
    result.baseline_cell, result.baseline_order = base.cell, list(base.order)
    result.baseline_stats = _summary(theirs) if theirs else None
    n = min(len(cand), len(theirs))
    pairs = [(a, b) for a, b in zip(cand[:n], theirs[:n], strict=True) if a > 0 and b > 0]
    if len(theirs) < gate.runs:
        findings.add(
            "GATE_TOO_FEW_RUNS",
            f"gate on {gate.metric} needs {gate.runs} baseline runs, {len(theirs)} produced a value",
        )
        result.passed = False
    if not pairs:
        findings.add("BASELINE_UNAVAILABLE", f"gate on {gate.metric}: no pair of runs with values above zero")
        result.passed = False
        result.bound = "baseline unavailable"
        return False
    logs = [math.log(a / b) for a, b in pairs]
    result.ratios = [a / b for a, b in pairs]
    result.ratio = math.exp(sum(logs) / len(logs))
    result.baseline_value = _summary(theirs).mean
    if len(pairs) < 2:
        result.test = "point"
        _fixed_ratio(gate, result, rules, findings)
        return True
    d = _summary(logs)
    assert d.sd is not None
    design = Design(candidate_cv=d.sd, candidate_runs=d.n)
    half = design.t_crit() * d.sd / math.sqrt(d.n)
    result.ratio_low, result.ratio_high = math.exp(d.mean - half), math.exp(d.mean + half)
    result.test = "paired-t-one-sided-95"
    how = f"paired t over {d.n} interleaved pairs, log ratio sd {d.sd:.3g}"
    _judge_ratio_bounds(gate, design, result, how=how, spread="", rules=rules, findings=findings)
    return True


def _baseline_host(
    gate: Gate, base: BaselineValues, host: dict[str, str] | None, result: GateResult, findings: Findings
) -> None:
    """A baseline from an earlier receipt: its host is named on the gate; another kind of host than the one
    measuring now is ``BASELINE_OTHER_HOST`` (the ratio would hold the machine's difference, not the engine's)."""
    if base.receipt is None or base.kind(gate.metric) not in ("samples", "receipt"):
        return
    result.baseline_receipt = base.receipt
    result.baseline_host = base.host
    if base.host is None or host is None:
        return
    theirs, ours = host_kind(base.host), host_kind(host)
    if theirs != ours:
        result.passed = False
        findings.add(
            "BASELINE_OTHER_HOST",
            f"gate on {gate.metric}: baseline '{gate.baseline}' was measured on another kind of host "
            f"({_host_text(theirs)}) than this one ({_host_text(ours)}): measure it here, or beside the "
            "candidate (an image or cell baseline)",
        )


def _host_text(kind: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(kind.items())) or "unknown"


def _weak(power: GatePower) -> str:
    return (
        f" (the gate is underpowered: it detects {power.detectable_regression:.2%}, guards {power.guards:.2%})"
        if (power.underpowered and power.guards is not None)
        else ""
    )


def _underpowered(power: GatePower, c: SampleSummary) -> str:
    assert power.guards is not None
    runs = (
        f"{power.runs_needed} runs would detect it"
        if power.runs_needed is not None
        else f"more than {MAX_RUNS} runs would be needed: reduce the variation or guard a larger regression"
    )
    return (
        f"{c.n} runs with {power.se * math.sqrt(c.n):.2%} run-to-run variation detect a regression of "
        f"{power.detectable_regression:.2%} (one-sided 95 %, power {power.power:g}), more than the "
        f"{power.guards:.2%} the gate guards; {runs}"
    )


def _round(x: float) -> float:
    """Six significant digits: enough for a person, and the same bytes on every host."""
    return float(f"{x:.6g}")


def gate_power(gate: Gate, design: Design) -> GatePower:
    """The gate's error rates at the measured variation (``manifest.gate_power``)."""
    guards = gate.guarded
    margins = [m for m in (_margin_low(gate, 1.0), _margin_high(gate, 1.0)) if m is not None]
    if guards is None:
        caught = None
    elif gate.min_ratio is not None:
        caught = _margin_low(gate, 1.0 - guards)
    else:
        caught = _margin_high(gate, 1.0 + guards)
    if design.se == 0.0:
        ff = 0.0 if all(m > 0 for m in margins) else 1.0
        detection = None if caught is None else float(caught <= 0)
        mde = 0.0
    else:
        ff = min(1.0, sum(gate_fail_probability(design, margin=m) for m in margins))
        detection = None if caught is None else gate_fail_probability(design, margin=caught)
        mde = detectable_regression(design) or 0.0
    under = guards is not None and mde > guards
    return GatePower(
        df=_round(design.df),
        t=_round(design.t_crit()),
        se=_round(design.se),
        guards=None if guards is None else _round(guards),
        detectable_regression=_round(mde),
        false_failure_rate=_round(ff),
        detection_rate=None if detection is None else _round(detection),
        runs_needed=runs_for_regression(design, guards) if under and guards is not None else None,
        underpowered=under,
    )


def _margin_low(gate: Gate, rho: float) -> float | None:
    return None if gate.min_ratio is None else rho - gate.min_ratio


def _margin_high(gate: Gate, rho: float) -> float | None:
    return None if gate.max_ratio is None else gate.max_ratio - rho


def _against_bounds(gate: Gate, result: GateResult, rules: list[str], findings: Findings) -> None:
    """The absolute rules: the candidate's lower bound above ``min``, its upper bound below ``max`` (one run:
    the value itself, a point comparison)."""
    point = result.candidate
    assert point is not None
    low = result.candidate_low if result.candidate_low is not None else point
    high = result.candidate_high if result.candidate_high is not None else point
    is_point = result.test == "point"
    if gate.min is not None:
        rules.append(
            f"value >= {gate.min} (1 run: point comparison)" if is_point else f"lower 95% bound >= {gate.min}"
        )
        if low < gate.min:
            result.passed = False
            shown = "1 run: no bound" if is_point else f"low {low:.4g}"
            findings.add("GATE_BELOW_MIN", f"{gate.metric}: {point:.4g} ({shown}) is below {gate.min}")
    if gate.max is not None:
        rules.append(
            f"value <= {gate.max} (1 run: point comparison)" if is_point else f"upper 95% bound <= {gate.max}"
        )
        if high > gate.max:
            result.passed = False
            shown = "1 run: no bound" if is_point else f"high {high:.4g}"
            findings.add("GATE_ABOVE_MAX", f"{gate.metric}: {point:.4g} ({shown}) is above {gate.max}")


def accuracy_against_baseline(wilson_low: float, expected: float, rtol: float) -> bool:
    """vLLM's opt-in rule: the one-sided Wilson lower bound must reach expected x (1 - rtol)."""
    return wilson_low >= expected * (1 - rtol)
