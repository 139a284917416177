"""The highest request rate meeting the SLO: bisection between a low and a high rate, bounded in probes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gpuwise.loadtest.types import LevelSummary, RateSearch

Probe = Callable[[float], Awaitable[LevelSummary | None]]  # None: interrupted


async def find_max_rate(
    probe: Probe, low: float, high: float, max_probes: int = 8, tolerance: float = 0.03
) -> RateSearch:
    """Probe ``high`` (meets the SLO: done), then ``low`` (misses: no rate meets it), then bisect until the
    bracket is within ``tolerance`` of its low end or ``max_probes`` are spent. The answer is the highest
    rate that met the SLO (a lower bound of the true maximum, at most one bracket width below it).
    """
    probes: list[LevelSummary] = []

    async def meets(rate: float) -> bool | None:
        summary = await probe(rate)
        if summary is not None:
            probes.append(summary)
        if summary is None or summary.interrupted:
            return None
        return bool(summary.slo_met)

    top = await meets(high)
    if top:
        return RateSearch(high, low, high, probes, bounded_by_high=True)
    bottom = None if top is None else await meets(low)
    if bottom is None:  # interrupted: only what the finished probes showed, never "no rate met it"
        met = [p.target for p in probes if p.slo_met and not p.interrupted]
        return RateSearch(max(met) if met else None, low, high, probes, interrupted=True)
    if not bottom:
        return RateSearch(None, low, high, probes)
    lo, hi = low, high
    while len(probes) < max_probes and (hi - lo) > tolerance * lo:
        mid = (lo + hi) / 2
        ok = await meets(mid)
        if ok is None:
            return RateSearch(lo, lo, hi, probes, interrupted=True)
        lo, hi = (mid, hi) if ok else (lo, mid)
    return RateSearch(lo, lo, hi, probes)


__all__ = ["Probe", "find_max_rate"]
