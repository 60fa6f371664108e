"""What a ratio gate can tell apart: Student t quantiles and the gate's error rates at a given variation.

A ratio gate fails when the one-sided 95 % bound of candidate/baseline falls below ``min_ratio``
(above ``max_ratio``). Written as a test statistic, it fails when

    (ratio_estimate - threshold) / se_hat < t_crit

where ``se_hat`` is the ratio's estimated standard error. With normal runs, ``se_hat / se`` is
distributed as ``S = sqrt(chi2_df / df)`` (exactly when the baseline is one number; by the
Welch-Satterthwaite approximation when it has its own samples), independent of the estimate, so

    P(fail | true ratio rho) = E_S[ Phi(t_crit * S - (rho - threshold) / se) ]

(the non-central t distribution). ``fail_probability`` computes that expectation by Simpson's rule
over the density of ``S``: deterministic, no simulation. ``t_crit = 0`` is a point comparison (one
run): ``Phi(-(rho - threshold) / se)``.

The gate's *detectable regression* is the smallest drop of the true ratio that a one-sided 95 % test
against "unchanged" finds with probability ``POWER`` (0.8): the resolving power of its runs at the
measured variation, whatever threshold the gate applies. Variation is relative (sd / mean), and
``se = sqrt(cv_c**2 / n_c + cv_b**2 / n_b)`` in units of the ratio.

Everything here is pure arithmetic, shared by ``manifest validate`` (at a typical variation) and the
validate stage (at the measured one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

CONFIDENCE = 0.95
POWER = 0.8
# The largest ``runs`` a gate may ask for (``Gate.runs``); a search for enough runs stops there.
MAX_RUNS = 100
_SIMPSON_STEPS = 1000


def _log_beta_front(x: float, a: float, b: float) -> float:
    return math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), valid for x < (a+1)/(a+b+2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(_log_beta_front(x, a, b)) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(_log_beta_front(1.0 - x, b, a)) * _beta_fraction(1.0 - x, b, a) / b


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` (> 0, not necessarily whole) degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom {df} <= 0")
    tail = 0.5 * incomplete_beta(df / (df + x * x), df / 2.0, 0.5)
    return 1.0 - tail if x > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The x with ``t_cdf(x, df) == p`` (bisection to 1e-12), e.g. ``t_quantile(0.975, 2) == 4.303``."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability {p} outside (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2.0


def normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@lru_cache(maxsize=256)
def _scale_grid(df: float) -> tuple[tuple[float, float], ...]:
    """(s, Simpson weight x density of S = sqrt(chi2_df / df) at s) over the range that holds S."""
    spread = 10.0 / math.sqrt(df)
    lo, hi = max(0.0, 1.0 - spread), 1.0 + max(10.0, spread)
    step = (hi - lo) / _SIMPSON_STEPS
    half = df / 2.0
    front = math.log(2.0) + half * math.log(half) - math.lgamma(half)
    grid = []
    for i in range(_SIMPSON_STEPS + 1):
        s = lo + i * step
        if s > 0.0:
            density = math.exp(front + (df - 1.0) * math.log(s) - half * s * s)
        else:
            density = math.sqrt(2.0 / math.pi) if df == 1 else 0.0
        weight = 1 if i in (0, _SIMPSON_STEPS) else 4 if i % 2 else 2
        grid.append((s, weight * density * step / 3.0))
    return tuple(grid)


def fail_probability(t_crit: float, shift: float, df: float) -> float:
    """E_S[Phi(t_crit * S - shift)], S = sqrt(chi2_df / df): the chance that (estimate - threshold) / se_hat
    falls below ``t_crit`` when the true (estimate - threshold) / se is ``shift``."""
    if t_crit == 0.0 or math.isinf(df):
        return normal_cdf(t_crit - shift)
    total = sum(w * normal_cdf(t_crit * s - shift) for s, w in _scale_grid(df))
    return min(1.0, max(0.0, total))


@dataclass(frozen=True)
class Design:
    """A ratio gate's sampling design: relative variation (sd / mean) and runs of each side.

    ``baseline_cv`` 0 with ``baseline_runs`` 1 is a baseline that is one number (no spread known)."""

    candidate_cv: float
    candidate_runs: int
    baseline_cv: float = 0.0
    baseline_runs: int = 1

    @property
    def se(self) -> float:
        """The ratio's standard error (relative)."""
        b = self.baseline_cv**2 / self.baseline_runs if self.baseline_runs > 1 else 0.0
        return math.sqrt(self.candidate_cv**2 / self.candidate_runs + b)

    @property
    def df(self) -> float:
        """Welch-Satterthwaite degrees of freedom (``candidate_runs - 1`` against one number); inf for one run."""
        a = self.candidate_cv**2 / self.candidate_runs
        b = self.baseline_cv**2 / self.baseline_runs if self.baseline_runs > 1 else 0.0
        if self.candidate_runs < 2 and b == 0.0:
            return math.inf
        parts = (a * a / (self.candidate_runs - 1) if self.candidate_runs > 1 else 0.0) + (
            b * b / (self.baseline_runs - 1) if b else 0.0
        )
        if parts == 0.0:
            return float(self.candidate_runs - 1 + max(0, self.baseline_runs - 1))
        return (a + b) ** 2 / parts

    @property
    def point(self) -> bool:
        """One run against one number: a point comparison, no bound."""
        return self.candidate_runs < 2 and self.baseline_runs < 2

    def t_crit(self) -> float:
        """The one-sided 95 % t quantile the gate's bound uses (0 for a point comparison)."""
        return 0.0 if self.point else t_quantile(CONFIDENCE, self.df)

    def with_runs(self, runs: int) -> Design:
        """The same variation over ``runs`` runs (of each side, where the baseline has samples)."""
        return Design(
            self.candidate_cv, runs, self.baseline_cv, runs if self.baseline_runs > 1 else self.baseline_runs
        )


def gate_fail_probability(design: Design, *, margin: float) -> float:
    """P(the gate fails) when the true ratio is ``margin`` inside its threshold (``rho - min_ratio`` or
    ``max_ratio - rho``; negative: outside). Needs ``se > 0``."""
    return fail_probability(design.t_crit(), margin / design.se, design.df)


def detectable_regression(design: Design) -> float | None:
    """The smallest relative drop found at 95 % with power 0.8 (None: one run, no variation known)."""
    if design.point or design.se == 0.0:
        return None
    t = t_quantile(CONFIDENCE, design.df)
    lo, hi = 0.0, 1.0
    while fail_probability(-t, -hi, design.df) < POWER:
        hi *= 2.0
    while hi - lo > 1e-7 * hi:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if fail_probability(-t, -mid, design.df) < POWER else (lo, mid)
    return hi * design.se


def runs_for_regression(design: Design, guards: float) -> int | None:
    """The fewest runs (>= 2) whose detectable regression is at most ``guards``; None beyond ``MAX_RUNS``."""

    def enough(n: int) -> bool:
        found = detectable_regression(design.with_runs(n))
        return found is not None and found <= guards

    return _fewest(enough)


def runs_for_false_failures(design: Design, *, margin: float, limit: float) -> int | None:
    """The fewest runs (>= 2) whose false-failure rate at ``margin`` is at most ``limit``; None beyond ``MAX_RUNS``."""
    return _fewest(lambda n: gate_fail_probability(design.with_runs(n), margin=margin) <= limit)


def _fewest(enough: Callable[[int], bool]) -> int | None:
    """The smallest n in 2..MAX_RUNS with ``enough(n)`` (monotone in n), or None."""
    if not enough(MAX_RUNS):
        return None
    lo, hi = 1, MAX_RUNS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def _margin_failing(design: Design, probability: float) -> float:
    """The margin (true ratio minus ``min_ratio``) at which the gate fails with ``probability`` (bisection)."""
    lo, hi = -40.0 * design.se, 40.0 * design.se  # fails almost surely at lo, almost never at hi
    while hi - lo > 1e-9 * design.se:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if gate_fail_probability(design, margin=mid) > probability else (lo, mid)
    return (lo + hi) / 2.0


def threshold_window(design: Design, *, guards: float, limit: float) -> tuple[float, float] | None:
    """The ``min_ratio`` values at which the gate both fails an unchanged candidate at most ``limit`` of the
    time and catches a regression of ``guards`` at least ``1 - limit`` of the time: (lowest, highest), or
    None when no threshold does both at these runs. Needs ``se > 0``."""
    highest = 1.0 - _margin_failing(design, limit)
    lowest = 1.0 - guards - _margin_failing(design, 1.0 - limit)
    return (lowest, highest) if lowest <= highest else None


def runs_for_error_rates(design: Design, *, guards: float, limit: float) -> tuple[int, float, float] | None:
    """The fewest runs (>= 2) at which some ``min_ratio`` keeps both error rates (false failure of an unchanged
    candidate, a missed ``guards`` regression) at most ``limit``, with that window of thresholds; None beyond
    ``MAX_RUNS``."""
    runs = _fewest(lambda n: threshold_window(design.with_runs(n), guards=guards, limit=limit) is not None)
    if runs is None:
        return None
    window = threshold_window(design.with_runs(runs), guards=guards, limit=limit)
    assert window is not None
    return runs, window[0], window[1]
