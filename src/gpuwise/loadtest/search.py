"""The highest request rate meeting the SLO: bisection between a low and a high rate, bounded in probes.

Each rate is probed ``repeats`` times with seeds ``seed … seed + repeats - 1`` (a seeded Poisson schedule of
a few hundred requests offers up to ±10-20 % off its nominal rate, and its bursts differ by seed); a rate
meets the SLO only when every repeat does. The answer states the rate the schedules actually offered and a
95 % interval: the lower end from the answer's offered rates (Student t over its repeats), the upper end
from the first failing rate's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Awaitable, Callable

from gpuwise.loadtest.types import LevelSummary, RateSearch

Probe = Callable[[float, int], Awaitable[LevelSummary | None]]  # (rate, seed offset); None: interrupted

# Two-sided 95 % Student t quantiles by degrees of freedom (scipy.stats.t.ppf(0.975, df)); 1.96 beyond.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def _offered(summaries: list[LevelSummary]) -> list[float]:
    return [s.offered_rate_per_s if s.offered_rate_per_s else s.target for s in summaries]


def _interval(rates: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval of offered rates (requests/s); zero width for one value."""
    mean = statistics.fmean(rates)
    if len(rates) < 2:
        return mean, mean, mean
    half = _T95.get(len(rates) - 1, 1.96) * statistics.stdev(rates) / math.sqrt(len(rates))
    return mean, mean - half, mean + half


async def find_max_rate(
    probe: Probe,
    low: float,
    high: float,
    max_probes: int = 8,
    tolerance: float = 0.03,
    repeats: int = 1,
) -> RateSearch:
    """Probe ``high`` (meets the SLO: done), then ``low`` (misses: no rate meets it), then bisect until the
    bracket is within ``tolerance`` of its low end or ``max_probes`` rates are spent. The answer is the
    highest rate that met the SLO (a lower bound of the true maximum, at most one bracket width below it).
    """
    probes: list[LevelSummary] = []
    by_rate: dict[float, list[LevelSummary]] = {}

    async def meets(rate: float) -> bool | None:
        ok = True
        for k in range(repeats):
            summary = await probe(rate, k)
            if summary is not None:
                probes.append(summary)
                by_rate.setdefault(rate, []).append(summary)
            if summary is None or summary.interrupted:
                return None
            ok &= bool(summary.slo_met)
            if not ok:
                return False  # one miss decides: no need to spend the other repeats
        return True

    def answer(lo: float | None, hi: float | None, **flags: bool) -> RateSearch:
        result = RateSearch(lo, low, high, probes, repeats=repeats, **flags)
        if lo is not None and by_rate.get(lo):
            result.offered_rate_per_s, result.ci_low_per_s, _ = _interval(_offered(by_rate[lo]))
        if hi is not None and by_rate.get(hi) and not flags.get("bounded_by_high"):
            result.ci_high_per_s = _interval(_offered(by_rate[hi]))[2]
        if result.ci_low_per_s is not None and repeats < 2:
            result.ci_low_per_s = None  # one schedule: no spread to estimate
        return result

    top = await meets(high)
    if top:
        return answer(high, None, bounded_by_high=True)
    bottom = None if top is None else await meets(low)
    if bottom is None:  # interrupted: only what the finished probes showed, never "no rate met it"
        met = [r for r, ss in by_rate.items() if len(ss) == repeats and all(s.slo_met for s in ss)]
        return answer(max(met) if met else None, None, interrupted=True)
    if not bottom:
        return answer(None, low)
    lo, hi = low, high
    while len(by_rate) < max_probes and (hi - lo) > tolerance * lo:
        mid = (lo + hi) / 2
        ok = await meets(mid)
        if ok is None:
            return answer(lo, hi, interrupted=True)
        lo, hi = (mid, hi) if ok else (lo, mid)
    return answer(lo, hi)


__all__ = ["Probe", "find_max_rate"]
