"""Timing loops: wall clock around a synchronizing call on the CPU, CUDA events on a GPU.

Each timed call is measured on its own, so a benchmark can take the best (the machine's
capability, what MAMF reports) and the median (what a busy machine gives) of the same samples.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Samples:
    """The times of the individual timed calls, in seconds."""

    times_s: list[float]

    @property
    def best_s(self) -> float:
        """The fastest call (s): the machine's capability."""
        return min(self.times_s)

    @property
    def median_s(self) -> float:
        """The median call (s): what a machine under its current load gives."""
        return statistics.median(self.times_s)

    @property
    def quartiles_s(self) -> tuple[float, float]:
        """(p75, p25) of the call times (s), i.e. the slow and fast ends of the middle half of the calls."""
        if len(self.times_s) < 2:
            return self.times_s[0], self.times_s[0]
        q1, _, q3 = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return q3, q1


def wall_clock_samples(
    fn: Callable[[], Any],
    warmup: int,
    max_repeats: int,
    budget_s: float,
    sync: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
    min_repeats: int = 1,
) -> Samples:
    """Time `fn` up to `max_repeats` times (at least `min_repeats`) or until `budget_s` of timed calls
    passed."""
    for _ in range(warmup):
        fn()
    sync()
    times: list[float] = []
    spent = 0.0
    while len(times) < max_repeats and (len(times) < min_repeats or spent < budget_s):
        start = clock()
        fn()
        sync()
        times.append(clock() - start)
        spent += times[-1]
    return Samples(times)


class TimingEvent(Protocol):
    """What torch.cuda.Event(enable_timing=True) offers (faked in tests: no CPU path exists)."""

    def record(self) -> None:
        """Record the event in the current CUDA stream."""

    def elapsed_time(self, end: Any) -> float:
        """Milliseconds between this recorded event and ``end``."""


def event_samples(
    fn: Callable[[], Any],
    warmup: int,
    repeats: int,
    new_event: Callable[[], TimingEvent],
    synchronize: Callable[[], None],
) -> Samples:
    """Time `fn` on the device with a start/end event pair per call; one synchronize at the end, so the
    host never stalls the queue between calls. CUDA events report milliseconds."""
    for _ in range(warmup):
        fn()
    pairs = []
    for _ in range(max(1, repeats)):
        start, end = new_event(), new_event()
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    synchronize()
    return Samples([start.elapsed_time(end) / 1000.0 for start, end in pairs])


__all__ = ["Samples", "TimingEvent", "event_samples", "wall_clock_samples"]
