"""When each request is sent: Poisson or evenly spaced arrivals at a rate (seeded), for rate mode."""

from __future__ import annotations

import random

from gpuwise.loadtest.types import LoadMode


def arrival_times(mode: LoadMode, rate_per_s: float, count: int, seed: int) -> list[float]:
    """Send offsets in seconds for ``count`` requests; the first is sent at 0.

    Poisson: exponential gaps with mean 1/rate (vLLM's default, burstiness 1); constant: exactly 1/rate.
    """
    if rate_per_s <= 0:
        raise ValueError("rate must be > 0")
    rng = random.Random(seed)
    times, now = [], 0.0
    for i in range(count):
        if i:
            now += rng.expovariate(rate_per_s) if mode == "poisson" else 1.0 / rate_per_s
        times.append(now)
    return times


__all__ = ["arrival_times"]
