"""Robust statistics over measured series, and the step shares the rules and the views read.

The rules, the profile view (which marks outlier steps), the profiler (which trims outlier steps
before it computes phase shares) and the planner (which carries a CPU run's input share to a GPU
plan) must agree on what a typical step is and what is an outlier; they all import from here, so
one definition serves them all. Times are seconds, shares are percentages (0-100) of a step.
"""

from __future__ import annotations

import math
import statistics

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence

__all__ = ["input_share_pct", "outlier_limit_s", "step_spread", "theil_sen", "typical_share_pct"]


def outlier_limit_s(times: list[float]) -> float:
    """Steps slower than this are outliers. Judged against the typical step, median and a robust spread,
    so the outliers do not hide themselves; identical typical steps give MAD 0 and the floor applies
    (the standard deviation would let the outliers themselves raise the bar).

    ``times`` are step durations in seconds (at least one); the limit is in seconds too."""
    median = statistics.median(times)
    mad = statistics.median(abs(t - median) for t in times) * T.MAD_TO_SIGMA
    return median + T.OUTLIER_SIGMA * max(mad, T.OUTLIER_MIN_SPREAD_FRACTION * median)


def theil_sen(steps: list[int], values: list[float]) -> tuple[float, float, float]:
    """(slope, lower bound of its two-sided confidence interval, intercept) over (step, value) points.

    The median of pairwise slopes ignores a few wild readings (a GC pass, a cache warming up) that
    make a least-squares slope or a "most deltas rise" count unreliable; the bound is Sen's (1968)
    rank interval, so a slope whose lower bound is above zero is a trend, not noise. ``steps`` and
    ``values`` have equal length (at least two distinct steps); the slope is in value units per step."""
    if len(steps) > T.MEMORY_TREND_MAX_POINTS:
        stride = len(steps) / T.MEMORY_TREND_MAX_POINTS
        picks = sorted({int(i * stride) for i in range(T.MEMORY_TREND_MAX_POINTS)} | {len(steps) - 1})
        steps, values = [steps[i] for i in picks], [values[i] for i in picks]
    n = len(steps)
    slopes = sorted(
        (values[j] - values[i]) / (steps[j] - steps[i])
        for i in range(n)
        for j in range(i + 1, n)
        if steps[j] != steps[i]
    )
    slope = statistics.median(slopes)
    spread = T.MEMORY_TREND_Z * math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    low_index = max(0, min(len(slopes) - 1, math.floor((len(slopes) - spread) / 2)))
    intercept = statistics.median(v - slope * x for x, v in zip(steps, values, strict=True))
    return slope, slopes[low_index], intercept


def typical_share_pct(ev: Evidence, phase: str) -> float | None:
    """A phase's share of a typical step (%): trimmed phases when measured, else the mean step's.
    None when the evidence times neither."""
    typical = ev.steps.phase_s_typical or {}
    if phase in typical and sum(typical.values()) > 0:
        return 100.0 * typical[phase] / sum(typical.values())
    return ev.steps.phase_pct(phase)


def input_share_pct(ev: Evidence) -> float | None:
    """The data-wait share of a typical step (%): trimmed phases when measured (one 800 ms stall must not
    dilute it below a threshold), else the measured share. None when nothing measured it."""
    typical = ev.steps.phase_s_typical or {}
    if "data_wait" in typical and sum(typical.values()) > 0:
        return 100.0 * typical["data_wait"] / sum(typical.values())
    if ev.loader.input_wait_pct is not None:
        return ev.loader.input_wait_pct
    return ev.steps.phase_pct("data_wait")


def step_spread(ev: Evidence) -> tuple[float, float] | None:
    """(lower quartile, upper quartile) of the measured step times over their median: how far another
    run's typical step may sit from this one's, so a gain predicted from one run carries that spread
    (quiet 2 cores: a loader fix's measured pairs spread 0.62-0.96x around 0.78x while the model gave one
    point). None with fewer than ``MIN_STEPS_FOR_STATISTICS`` steps or a zero median."""
    times = ev.steps.step_times_s
    if len(times) < T.MIN_STEPS_FOR_STATISTICS:
        return None
    median = statistics.median(times)
    if median <= 0:
        return None
    q1, _, q3 = statistics.quantiles(times, n=4)
    return q1 / median, q3 / median
