"""Each timed ratio gate can pass an unchanged release at typical run-to-run variation.

A gate whose threshold sits too close to 1 for its runs fails good releases by chance, and a
gate that fails half of all good releases gets switched off. At ``TYPICAL_RUN_TO_RUN_CV`` (the
relative standard deviation of one run) this check computes the probability that an unchanged
candidate fails the gate's own rule (``manifest.gate_power``; the baseline taken as one number,
as a receipt or manifest value is) and warns above ``MAX_FALSE_FAILURE_RATE``, saying how many
runs would bring it under.
"""

from __future__ import annotations

from releasekit.findings import Findings, Severity
from releasekit.manifest.checks.context import Located, ManifestContext
from releasekit.manifest.gate_power import MAX_RUNS, Design, gate_fail_probability, runs_for_false_failures
from releasekit.manifest.validation import Gate

# Typical run-to-run variation (sd / mean) of one timed run. Source: issue 45, which puts the
# run-to-run variation of decode and step rates between 0.3 % and 2 %; 1 % is taken as typical.
TYPICAL_RUN_TO_RUN_CV = 0.01
# A gate should fail an unchanged release at most this often.
MAX_FALSE_FAILURE_RATE = 0.05
# The checks whose metrics are timings (run-to-run variation applies); others are counts or scores.
TIMED_KINDS = ("decode", "throughput")


def false_failure_rate(gate: Gate, cv: float = TYPICAL_RUN_TO_RUN_CV) -> float:
    """P(an unchanged candidate fails ``gate``) at relative variation ``cv`` over the gate's runs."""
    design = Design(candidate_cv=cv, candidate_runs=gate.runs)
    return min(1.0, sum(gate_fail_probability(design, margin=m) for m in _margins(gate)))


def _margins(gate: Gate) -> list[float]:
    return [m for m in (_low(gate), _high(gate)) if m is not None]


def _low(gate: Gate) -> float | None:
    return None if gate.min_ratio is None else 1.0 - gate.min_ratio


def _high(gate: Gate) -> float | None:
    return None if gate.max_ratio is None else gate.max_ratio - 1.0


class GateThresholds:
    name = "gate-thresholds"
    codes = ("GATE_THRESHOLD_UNMEETABLE",)

    def run(self, ctx: ManifestContext) -> Findings:
        out = Located(ctx)
        for i, cell in enumerate(ctx.manifest.validation.cells):
            for j, gate in enumerate(cell.gates):
                if gate.baseline is None or gate.metric.split(".", 1)[0] not in TIMED_KINDS:
                    continue
                rate = false_failure_rate(gate)
                if rate <= MAX_FALSE_FAILURE_RATE:
                    continue
                out.add(
                    "GATE_THRESHOLD_UNMEETABLE",
                    f"cell '{cell.id}' gate on {gate.metric}: at {TYPICAL_RUN_TO_RUN_CV:.0%} run-to-run variation "
                    f"(typical) an unchanged candidate fails {rate:.0%} of the time with runs {gate.runs} and "
                    f"{_threshold(gate)}; {_remedy(gate)}",
                    ("validation", "cells", i, "gates", j),
                    severity=Severity.warning,
                    cell=cell.id,
                )
        return out.findings


def _threshold(gate: Gate) -> str:
    return ", ".join(
        f"{name} {value}"
        for name, value in (("min_ratio", gate.min_ratio), ("max_ratio", gate.max_ratio))
        if value
    )


def _remedy(gate: Gate) -> str:
    """How many runs would bring the false-failure rate under the limit (the tighter side decides)."""
    margin = min(_margins(gate))
    design = Design(candidate_cv=TYPICAL_RUN_TO_RUN_CV, candidate_runs=gate.runs)
    limit = MAX_FALSE_FAILURE_RATE / len(_margins(gate))
    runs = runs_for_false_failures(design, margin=margin, limit=limit) if margin > 0 else None
    if runs is None:
        return f"no number of runs up to {MAX_RUNS} brings it under {MAX_FALSE_FAILURE_RATE:.0%}: loosen the threshold"
    return f"{runs} runs would bring it under {MAX_FALSE_FAILURE_RATE:.0%}"
