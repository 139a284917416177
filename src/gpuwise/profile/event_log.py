"""The hooks' event log and its replay into ``StepRecord``s (see ``phases.py`` for why a flat log).

``mark`` is the hot path: two appends. Replays happen in batches (every ``DRAIN_EVERY_EVENTS``
entries or ``DRAIN_EVERY_S`` seconds, decided at step boundaries) and whenever the record is read,
from any thread: a periodic flush replays what the training thread logged so far (under a lock, and
only whole ``(code, value)`` pairs), so a hard kill loses at most the time since that flush.
"""

from __future__ import annotations

import threading
from time import perf_counter

from gpuwise.profile.phases import EXIT, STEP, PhaseTimer, StepRecord

DRAIN_EVERY_EVENTS = 2048  # log entries (code + value) between replays into StepRecords: ~100 steps
DRAIN_EVERY_S = 2.0  # ... or this long (a periodic flush replays the rest itself, see ``drain``)


class EventLog:
    """The flat ``[code, value, …]`` log the hooks append to, the ``PhaseTimer`` it is replayed into, the
    resulting ``StepRecord``s, and the host frames sampled between phases.
    """

    def __init__(self) -> None:
        self.entries: list[float] = []  # [code, value, code, value, ...] since the last replay
        self.append = self.entries.append
        self.timer = PhaseTimer()
        self.records: list[StepRecord] = []
        self.origin = 0.0  # step start times are relative to this (the recorder's start)
        self.drained_at = 0.0
        # (perf_counter time, (user frame, leaf frame)) from the frame sampler, filed at the next replay
        self.samples: list[tuple[float, tuple[str, str]]] = []
        self._lock = threading.RLock()

    def start(self, now: float) -> None:
        """Set the run's origin (perf_counter s): step start times are relative to it."""
        self.origin = self.drained_at = now

    def mark(self, code: int) -> None:
        """Entering or leaving a phase now (codes in ``phases.py``)."""
        append = self.append
        append(code)
        append(perf_counter())

    def log(self, code: int, value: float) -> None:
        """A counted event of the open step (``SYNC``, ``H2D_BYTES``, ...) or a phase at a given time."""
        append = self.append
        append(code)
        append(value)

    def drain(self) -> None:
        """Replay the log into StepRecords, from any thread. The training thread only ever appends, so
        the replay takes the whole pairs present now and deletes exactly those (a pair half-written
        meanwhile stays for the next replay)."""
        self.drained_at = perf_counter()
        with self._lock:
            entries = self.entries
            n = len(entries)
            n -= n % 2
            if n:
                used = self.timer.replay(entries[:n], self.origin, self.records, self.samples[:])
                del entries[:n]
                if used:
                    del self.samples[:used]

    def frame_counts(self) -> dict[tuple[str, str, str], int]:
        """A copy of the sampled frames filed so far: (gap phase, user frame, leaf frame) -> samples."""
        with self._lock:
            return dict(self.timer.frames)

    def has_activity(self) -> bool:
        """Has a step begun (a phase entered, a batch fetched or a boundary passed), replayed or not?"""
        return self.timer.step_start is not None or any(
            code < EXIT or code == STEP for code in self.entries[::2]
        )

    def reopen_closed_steps(self) -> None:
        """Fold every step closed so far back into the open one (the first manual ``p.step()`` ends
        one step that began at the first activity)."""
        with self._lock:  # a flush on another thread must not replay between these lines
            self._reopen_closed_steps()

    def _reopen_closed_steps(self) -> None:
        self.drain()
        timer = self.timer
        wall = sum(r.wall_s for r in self.records)
        for name in timer.acc:
            if name != "other":
                timer.acc[name] += sum(r.phase_s.get(name, 0.0) for r in self.records)
        for r in self.records:
            timer.counters[0] += r.sync_calls
            timer.counters[1] += r.sync_wait_s
            timer.counters[2] += r.h2d_bytes
            timer.counters[3] += r.h2d_pageable_bytes
        if timer.step_start is not None:
            timer.step_start -= wall
        self.records.clear()


__all__ = ["DRAIN_EVERY_EVENTS", "DRAIN_EVERY_S", "EventLog"]
