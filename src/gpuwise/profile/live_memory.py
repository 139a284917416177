"""Live memory at step boundaries, within a time budget (the measure itself is ``memory_probe.py``'s).

Reads are spaced so that the probe costs about ``MEMORY_PROBE_BUDGET`` of the run's time: after a
read costing c (the cheapest of the last ``COST_WINDOW``, since one read can wait for a preempted
vCPU), the next waits c / budget. A heap with more than ``MAX_FREE_CHUNKS`` free chunks switches the
run to RSS: a count, so the choice does not depend on machine load. When the window's length is known,
a read is also due every ``read_every_steps`` steps, so a short window still gets enough readings for a
trend (``MIN_READINGS_PER_WINDOW``).
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter

from gpuwise.profile.event_log import EventLog
from gpuwise.profile.memory_probe import (
    COST_WINDOW,
    HEAP_MEASURE,
    MAX_FREE_CHUNKS,
    MEMORY_PROBE_BUDGET,
    MIN_READINGS_PER_WINDOW,
    live_memory_probe,
    rss_reader,
)
from gpuwise.profile.phases import MEMORY, MEMORY_RSS


def _timed(read: Callable[[], float]) -> float:
    t0 = perf_counter()
    read()
    return perf_counter() - t0


class LiveMemory:
    """Paces the live-memory reads of a run (by time budget and by step) and records which measure is used."""

    def __init__(self, events: EventLog, notes: list[str]) -> None:
        self.events = events
        self.notes = notes
        self.measure = "not available"
        self.read: Callable[[], float] | None = None
        self.due_s = 0.0  # no read before this time (the recorder checks it before calling sample)
        self.read_every_steps: int | None = None  # set when the window's length is known
        self.due_step = float("inf")  # ... unless this step is reached
        self._costs: list[float] = []  # seconds of the last COST_WINDOW reads
        # RSS read beside the heap (a 2 µs read): the allocator's view and the process's together
        self.rss: Callable[[], float] | None = None

    def use(self, measure: str, read: Callable[[], float] | None) -> None:
        """Use ``read`` (returns bytes) under the name ``measure``, timing one read now as the first cost
        estimate; None: no reading available.
        """
        self.measure, self.read = measure, read
        self.rss = (rss_reader() or ("", None))[1] if measure == HEAP_MEASURE else None
        # a first cost, measured now: one preempted first read must not space out the rest
        self._costs = [_timed(read)] if read is not None else []

    def pace_for_window(self, steps: int) -> None:
        """A window of ``steps`` steps (warm-up included) gets at least MIN_READINGS_PER_WINDOW readings."""
        self.read_every_steps = max(1, steps // MIN_READINGS_PER_WINDOW)
        self.due_step = self.read_every_steps

    def start(self) -> None:
        """Pick the CPU measure (``live_memory_probe``); the recorder switches to CUDA's once the model is
        there.
        """
        self.use(*live_memory_probe("cpu"))

    def sample(self, step: int) -> None:
        """Log live memory for the step just closed (the caller checked ``read`` and ``due_s``)."""
        read = self.read
        if read is None:
            return
        t0 = perf_counter()
        value = read()
        costs = self._costs
        costs.append(perf_counter() - t0)
        del costs[:-COST_WINDOW]
        free_chunks = getattr(read, "free_chunks", 0)
        if free_chunks > MAX_FREE_CHUNKS:
            read = self._switch_to_rss(free_chunks, step)
            if read is None:
                return
            t0 = perf_counter()
            value = read()
            costs.append(perf_counter() - t0)
        self.events.log(MEMORY, value)
        if self.rss is not None:
            self.events.log(MEMORY_RSS, self.rss())
        self.due_s = t0 + min(costs) / MEMORY_PROBE_BUDGET
        if self.read_every_steps is not None:
            self.due_step = step + self.read_every_steps

    def _switch_to_rss(self, free_chunks: int, step: int) -> Callable[[], float] | None:
        """The heap fragmented (mallinfo2 got slow): RSS from here on; readings of two measures do not mix."""
        self.measure, self.read = rss_reader() or ("not available", None)
        self.rss = None
        self._costs.clear()
        self.events.drain()
        for rec in self.events.records:
            rec.memory_bytes = None
            rec.rss_bytes = None
        self.notes.append(
            f"live memory: the heap had {free_chunks} free chunks for mallinfo2 to walk; "
            f"{self.measure} from step {step} on"
        )
        return self.read


__all__ = ["LiveMemory"]
