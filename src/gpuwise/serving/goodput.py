"""Goodput: the highest request rate one replica serves while meeting the SLO, by a bounded
bisection over simulated rates; and the check of one simulated run against the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

from gpuwise.diagnose import thresholds as th
from gpuwise.serving.demand import RequestDraws
from gpuwise.serving.simulator import Replica, SimResult, simulate
from gpuwise.workload.serving import SloTarget

__all__ = [
    "FLOOR_FRACTION",
    "GOODPUT_CACHE_SIZE",
    "SATURATION_RATE",
    "SEARCH_PROBES",
    "Goodput",
    "effective_slo",
    "meets",
    "search_goodput",
    "slack",
]


SEARCH_PROBES = 6  # bisection steps between the floor and saturation: ~4 % resolution on a log scale
FLOOR_FRACTION = 1 / 64  # the lowest rate tried, as a fraction of the saturated throughput
SATURATION_RATE = 1e6  # requests/s: every request queued at once, the replica runs flat out


def effective_slo(slo: tuple[SloTarget, ...]) -> tuple[SloTarget, ...]:
    """The SLO, plus a bound on queueing when it names no TTFT target (queues must not grow)."""
    if any(t.metric == "ttft" for t in slo):
        return slo
    return (*slo, SloTarget("ttft", 99, th.SERVING_IMPLICIT_TTFT_P99_S))


def meets(result: SimResult, slo: tuple[SloTarget, ...]) -> bool:
    """Whether a simulation meets every SLO target (a run cut off by its time limit never does)."""
    if result.cut_off:
        return False
    return all(result.percentile(t.metric, t.percentile) <= t.seconds for t in slo)


def slack(result: SimResult, slo: tuple[SloTarget, ...]) -> dict[str, float]:
    """Each target's measured value over its limit (1.0 = exactly at the limit)."""
    return {t.key: result.percentile(t.metric, t.percentile) / t.seconds for t in slo}


@dataclass(frozen=True)
class Goodput:
    """The highest request rate per replica that meets the SLO, the saturation rate, the target that binds,
    and how many simulations the search took."""

    rate_rps: float  # per replica; 0 when the SLO cannot be met at any rate
    saturation_rps: float  # throughput flat out (SLO ignored)
    binding: str  # the SLO target that limits the rate ("" when none does)
    simulations: int


GOODPUT_CACHE_SIZE = 2048  # searches kept per process (~0.3 KB each); a serving plan makes ~200
_searched: dict[tuple[Hashable, ...], Goodput] = {}


def search_goodput(replica: Replica, draws: RequestDraws, slo: tuple[SloTarget, ...]) -> Goodput:
    """Largest rate meeting ``slo``, within ~4 %: log-scale bisection between 1/64 of the saturated
    throughput and the saturated throughput (at most ``SEARCH_PROBES`` + 2 simulations).

    A pure function of the replica's inputs (workload, GPU, architecture), the draws and the SLO, so a
    process that plans the same demand again (another output format, a library caller) reuses the
    search: at most ``GOODPUT_CACHE_SIZE`` are kept, the oldest dropped first."""
    slo = effective_slo(slo)
    key = (replica.workload, replica.gpu, replica.model.arch, draws, slo)
    found = _searched.get(key)
    if found is None:
        found = _search(replica, draws, slo)
        if len(_searched) >= GOODPUT_CACHE_SIZE:
            del _searched[next(iter(_searched))]
        _searched[key] = found
    return found


def _search(replica: Replica, draws: RequestDraws, slo: tuple[SloTarget, ...]) -> Goodput:
    flat_out = simulate(replica, draws, SATURATION_RATE)
    saturation = flat_out.throughput_rps
    if saturation <= 0:
        return Goodput(0.0, 0.0, "does not fit", 1)
    lo, hi = saturation * FLOOR_FRACTION, saturation
    floor_checked = False
    last_fail: SimResult | None = None
    runs = 1
    for _ in range(SEARCH_PROBES):
        mid = math.sqrt(lo * hi)
        run = simulate(replica, draws, mid)
        runs += 1
        if meets(run, slo):
            lo, floor_checked = mid, True  # a pass above the floor proves the floor passes too
        else:
            hi, last_fail = mid, run
            if not floor_checked:
                floor = simulate(replica, draws, lo)
                runs += 1
                floor_checked = True
                if not meets(floor, slo):
                    worst = max(slack(floor, slo).items(), key=lambda kv: kv[1])[0]
                    return Goodput(0.0, saturation, worst, runs)
    binding = max(slack(last_fail, slo).items(), key=lambda kv: kv[1])[0] if last_fail else ""
    return Goodput(lo, saturation, binding, runs)
