"""Demand: the request rate and the seeded draws of arrivals and prompt/output lengths.

The draws are made once per workload and reused at every rate the goodput search tries
(arrival gaps are unit-rate exponentials scaled by 1/rate), so two rates differ only in the
rate: common random numbers keep the search monotone.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuwise.workload import Workload
from gpuwise.workload.serving import SECONDS_PER_DAY, LengthDist, read_histogram

__all__ = ["RequestDraws", "draw_requests", "request_rate"]


_Z = {90: 1.2816, 99: 2.3263}  # standard normal quantiles


@dataclass(frozen=True)
class RequestDraws:
    """The drawn requests of one simulation: inter-arrival gaps at 1 request/s (scaled to the rate) and
    each request's prompt and output tokens."""

    gaps: tuple[float, ...]  # inter-arrival times at 1 request/s
    prompts: tuple[int, ...]
    outputs: tuple[int, ...]

    @property
    def mean_prompt(self) -> float:
        """Mean prompt length of the draws, in tokens."""
        return sum(self.prompts) / len(self.prompts)

    @property
    def mean_output(self) -> float:
        """Mean output length of the draws, in tokens."""
        return sum(self.outputs) / len(self.outputs)


def request_rate(w: Workload) -> float | None:
    """Requests/s the service must take: ``serving.rate``, or tokens/day over the mean request."""
    spec = w.serving
    if spec is None:
        return None
    if spec.rate_rps is not None:
        return spec.rate_rps
    if spec.tokens_per_day is not None:
        return spec.tokens_per_day / SECONDS_PER_DAY / (w.seq_len + w.output_len)
    return None


def draw_requests(w: Workload, count: int) -> RequestDraws:
    """``count`` Poisson arrivals (unit rate) and lengths, seeded by ``serving.seed``."""
    spec = w.serving
    rng = random.Random(spec.seed if spec else 0)
    gaps = tuple(rng.expovariate(1.0) for _ in range(count))
    prompt = _sampler(spec.prompt_len if spec else None, w.seq_len)
    output = _sampler(spec.output_len if spec else None, w.output_len)
    return RequestDraws(
        gaps, tuple(prompt(rng) for _ in range(count)), tuple(output(rng) for _ in range(count))
    )


def _sampler(dist: LengthDist | None, fixed: int) -> Callable[[random.Random], int]:
    if dist is None or (dist.p50 is None and not dist.histogram and dist.p90 is None and dist.p99 is None):
        return lambda rng: fixed
    if dist.histogram:
        lengths, weights = read_histogram(Path(dist.histogram))
        return lambda rng: rng.choices(lengths, weights)[0]
    median = dist.p50 or dist.mean
    tail = next(((p, v) for p, v in ((99, dist.p99), (90, dist.p90)) if v is not None), None)
    if tail is not None and tail[1] > median:
        sigma = math.log(tail[1] / median) / _Z[tail[0]]
    elif dist.mean > median:
        sigma = math.sqrt(2 * math.log(dist.mean / median))  # log-normal: mean = median · e^(σ²/2)
    else:
        sigma = 0.0
    mu = math.log(median)
    return lambda rng: max(1, round(rng.lognormvariate(mu, sigma)))
