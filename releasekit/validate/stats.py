"""Statistics for gates: Wilson bounds for accuracies, t-intervals for repeated timings.

A single run of a performance benchmark is noisy; gates therefore compare the lower
(or upper) confidence bound of k runs against the baseline, not one number.
"""

from __future__ import annotations

import math
from statistics import NormalDist, fmean, stdev

from pydantic import BaseModel

# Two-sided 95 % Student t quantiles (0.975) for small degrees of freedom; beyond 30, the normal.
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
}


def wilson_lower(successes: int, n: int, confidence: float = 0.95) -> float:
    """One-sided lower Wilson score bound of a binomial proportion (0 when n is 0)."""
    if n <= 0:
        return 0.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    z = NormalDist().inv_cdf(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - margin) / denom)


def wilson_upper(successes: int, n: int, confidence: float = 0.95) -> float:
    if n <= 0:
        return 1.0
    return 1.0 - wilson_lower(n - successes, n, confidence)


class Interval(BaseModel):
    """Mean of k samples with a two-sided 95 % t-interval (the half-width is 0 for one sample)."""

    n: int
    mean: float
    stdev: float
    low: float
    high: float


def t_interval(samples: list[float]) -> Interval:
    if not samples:
        raise ValueError("no samples")
    mean = fmean(samples)
    if len(samples) == 1:
        return Interval(n=1, mean=mean, stdev=0.0, low=mean, high=mean)
    sd = stdev(samples)
    df = len(samples) - 1
    t = T975.get(df, 1.96)
    half = t * sd / math.sqrt(len(samples))
    return Interval(n=len(samples), mean=mean, stdev=sd, low=mean - half, high=mean + half)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in 0..100."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def fieller(
    *, mean_c: float, var_c: float, mean_b: float, var_b: float, t: float
) -> tuple[float, float] | None:
    """Fieller's bounds for the ratio of two means: the roots R of (mean_c - R mean_b)^2 = t^2 (var_c + R^2 var_b).

    ``var_c`` and ``var_b`` are the variances of the means (sd^2 / n; 0 for a baseline that is one
    number, which leaves ``(mean_c -+ t sqrt(var_c)) / mean_b``). With ``t`` a one-sided 95 % quantile each
    end is a one-sided 95 % bound. None when the baseline's own spread leaves the ratio unbounded
    (its mean is not distinguishable from 0 at ``t``).
    """
    a = mean_b * mean_b - t * t * var_b
    if a <= 0:
        return None
    centre = mean_c * mean_b
    disc = t * t * (mean_c * mean_c * var_b + var_c * a)
    root = math.sqrt(max(0.0, disc))
    return (centre - root) / a, (centre + root) / a
