"""Exclusive phase accounting on the host clock, replayed from the hooks' event log.

Hooks run between a training step's large kernels, when the CPU caches hold torch's data and not
gpuwise's code, so each Python call they make costs microseconds, not the nanoseconds a warm
benchmark shows. The hot path therefore only appends ``(code, value)`` pairs to a flat list, the
event log; ``PhaseTimer.replay`` turns the log into ``StepRecord``s later, in batches, with warm
caches.

Phases nest (Lightning runs forward and backward inside ``optimizer.step(closure)``; a loss
computed by a module inside backward is recomputation). Every instant of a step is charged to
exactly one phase: the innermost open one, or ``other`` when none is open. So the phases of a
step always add up to its wall time, which is what makes a "share of the step" meaningful.

Host time outside every phase is split by what comes next: a gap that ends in a root forward (the
batch being prepared: a custom ``get_batch``, transforms, ``zero_grad``) is ``host_input``; gaps
before backward, the optimizer or the step's end stay ``other``. The replay also files the
training thread's sampled Python frames (``host_frames.py``) under the gap they fell in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter

PHASES = ("data_wait", "h2d_copy", "forward", "backward", "optimizer", "host_input", "other")
GAP_PHASES = ("host_input", "other")  # host time outside every hooked phase; never logged as codes

# Event codes: entering phase i is code i, leaving it is EXIT + i; the value is a perf_counter time.
EXIT = 8
DATA_IN, H2D_IN, FORWARD_IN, BACKWARD_IN, OPTIMIZER_IN = range(5)
DATA_OUT, H2D_OUT, FORWARD_OUT, BACKWARD_OUT, OPTIMIZER_OUT = (EXIT + i for i in range(5))
STEP = 16  # a step boundary at the given time
SYNC = 17  # the host waited this many seconds on the device (``.item()``, ``synchronize``, ...)
H2D_BYTES = 18  # bytes copied host -> device
H2D_PAGEABLE_BYTES = 19  # of those, bytes from pageable (not pinned) memory
MEMORY = 20  # live memory in bytes, read at the step boundary just logged
MEMORY_RSS = 21  # the process RSS in bytes, read with it (a second view of the same moment)


def phase_of(code: int) -> tuple[str, bool]:
    """(phase name, True when entering) for an enter or exit code."""
    return (PHASES[code], True) if code < EXIT else (PHASES[code - EXIT], False)


@dataclass
class StepRecord:
    """One step between two optimizer steps (or two ``p.step()`` calls)."""

    start_s: float
    wall_s: float
    phase_s: dict[str, float]
    memory_bytes: float | None = None
    rss_bytes: float | None = None
    sync_calls: int = 0
    sync_wait_s: float = 0.0
    h2d_bytes: int = 0
    h2d_pageable_bytes: int = 0
    gpu_phase_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The step as JSON (one line of the record's ``steps``)."""
        return {
            "start_s": self.start_s,
            "wall_s": self.wall_s,
            "phase_s": self.phase_s,
            "memory_bytes": self.memory_bytes,
            "rss_bytes": self.rss_bytes,
            "sync_calls": self.sync_calls,
            "sync_wait_s": self.sync_wait_s,
            "h2d_bytes": self.h2d_bytes,
            "h2d_pageable_bytes": self.h2d_pageable_bytes,
            "gpu_phase_s": self.gpu_phase_s,
        }


class PhaseTimer:
    """A stack of open phases; time goes to the top of the stack. Not thread-safe by design:
    only the training thread feeds it (hooks running on other threads are ignored by the caller)."""

    __slots__ = (
        "acc",
        "clock",
        "counters",
        "frames",
        "gap",
        "gap_frames",
        "gap_sync",
        "mark",
        "sample_from_step",
        "stack",
        "step_start",
        "steps",
    )

    def __init__(self, clock=perf_counter) -> None:
        self.clock = clock
        self.stack: list[str] = []
        self.acc = dict.fromkeys(PHASES, 0.0)
        self.mark = 0.0
        self.step_start: float | None = None
        self.counters = [
            0,
            0.0,
            0,
            0,
        ]  # sync calls, sync wait s, h2d bytes, pageable h2d bytes of the open step
        self.gap = 0.0  # host seconds outside every phase since the last compute phase or boundary
        self.gap_sync = 0.0  # of the gap, seconds the host waited on the device (a sync, not input work)
        self.gap_frames: list[tuple[str, str]] = []  # frames sampled in that gap, filed when it ends
        self.frames: dict[tuple[str, str, str], int] = {}  # (gap phase, user frame, leaf frame) -> samples
        self.steps = 0  # steps closed so far
        self.sample_from_step = 0  # frames sampled before this step (warm-up) are not counted

    def _charge(self, now: float) -> None:
        if self.stack:
            self.acc[self.stack[-1]] += now - self.mark
        else:
            self.gap += now - self.mark
        self.mark = now

    def _end_gap(self, phase: str) -> None:
        """The host gap ends: its time and frames go to ``phase`` (``other`` is the step's remainder)."""
        if phase == "host_input":
            self.acc["host_input"] += max(0.0, self.gap - self.gap_sync)
        if self.gap_frames and self.steps >= self.sample_from_step:
            frames = self.frames
            for user, leaf in self.gap_frames:
                key = (phase, user, leaf)
                frames[key] = frames.get(key, 0) + 1
        self.gap_frames.clear()
        self.gap = self.gap_sync = 0.0

    def push(self, phase: str, now: float | None = None) -> None:
        """Enter ``phase`` at ``now`` (perf_counter s; None: the clock now). The first activity starts the
        first step; a compute phase entered outside every phase ends the host gap (time before a forward is
        ``host_input``).
        """
        now = self.clock() if now is None else now
        if self.step_start is None:  # the first step starts at the first activity, not at import time
            self.step_start = now
            self.mark = now
        self._charge(now)
        if not self.stack and phase in ("forward", "backward", "optimizer"):
            # a data wait or a copy keeps the gap open: the batch is still being prepared
            self._end_gap("host_input" if phase == "forward" else "other")
        self.stack.append(phase)

    def pop(self, phase: str, now: float | None = None) -> None:
        """Leave ``phase`` at ``now``, also closing any phase opened inside it that never closed (an exception
        mid-phase).
        """
        now = self.clock() if now is None else now
        self._charge(now)
        # Pop down to the phase (tolerates a hook that never closed, e.g. an exception mid-phase).
        if phase in self.stack:
            while self.stack.pop() != phase:
                pass

    def sampled(self, frame: tuple[str, str]) -> None:
        """A Python frame sampled on the training thread at the replay's current time."""
        if not self.stack and self.step_start is not None:
            self.gap_frames.append(frame)

    def boundary(self, now: float | None = None) -> tuple[float, float, dict[str, float]] | None:
        """Close the step: (start, wall, exclusive phase seconds incl. 'other'); None before any activity."""
        now = self.clock() if now is None else now
        if self.step_start is None:
            self.step_start = self.mark = now
            return None
        self._charge(now)
        self._end_gap("other")
        wall = now - self.step_start
        phases = {k: v for k, v in self.acc.items() if k != "other"}
        phases["other"] = max(0.0, wall - sum(phases.values()))
        start = self.step_start
        self.acc = dict.fromkeys(PHASES, 0.0)
        self.step_start = now
        self.steps += 1
        return start, wall, phases

    def replay(self, log: list, origin: float, records: list[StepRecord], samples: list | None = None) -> int:
        """Feed a flat event log ``[code, value, code, value, ...]``, appending the steps it closes to
        ``records`` (start times relative to ``origin``). ``samples``: ``(time, frame)`` pairs in time
        order, filed under the gap each fell in. Returns how many samples were used (those after the
        log's last event wait for the next replay). The timer keeps its state between calls, so a log
        can be replayed in pieces."""
        counters = self.counters
        samples = samples or []
        used, pending = 0, len(samples)
        for i in range(0, len(log) - 1, 2):
            code, value = log[i], log[i + 1]
            if code <= STEP:
                while used < pending and samples[used][0] <= value:
                    self.sampled(samples[used][1])
                    used += 1
            if code < EXIT:
                self.push(PHASES[code], value)
            elif code < STEP:
                self.pop(PHASES[code - EXIT], value)
            elif code == STEP:
                done = self.boundary(value)
                if done is not None:
                    start, wall, phases = done
                    records.append(
                        StepRecord(
                            start - origin,
                            wall,
                            phases,
                            sync_calls=int(counters[0]),
                            sync_wait_s=counters[1],
                            h2d_bytes=int(counters[2]),
                            h2d_pageable_bytes=int(counters[3]),
                        )
                    )
                counters[:] = [0, 0.0, 0, 0]
            elif code == SYNC:
                counters[0] += 1
                counters[1] += value
                if not self.stack:
                    self.gap_sync += value
            elif code == H2D_BYTES:
                counters[2] += value
            elif code == H2D_PAGEABLE_BYTES:
                counters[3] += value
            elif code == MEMORY and records:
                records[-1].memory_bytes = value
            elif code == MEMORY_RSS and records:
                records[-1].rss_bytes = value
        return used


__all__ = [
    "BACKWARD_IN",
    "BACKWARD_OUT",
    "DATA_IN",
    "DATA_OUT",
    "EXIT",
    "FORWARD_IN",
    "FORWARD_OUT",
    "GAP_PHASES",
    "H2D_BYTES",
    "H2D_IN",
    "H2D_OUT",
    "H2D_PAGEABLE_BYTES",
    "MEMORY",
    "MEMORY_RSS",
    "OPTIMIZER_IN",
    "OPTIMIZER_OUT",
    "PHASES",
    "STEP",
    "SYNC",
    "PhaseTimer",
    "StepRecord",
    "phase_of",
]
