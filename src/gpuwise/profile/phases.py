"""Exclusive phase accounting on the host clock.

Phases nest (Lightning runs forward and backward inside ``optimizer.step(closure)``; a loss
computed by a module inside backward is recomputation). Every instant of a step is charged to
exactly one phase: the innermost open one, or ``other`` when none is open. So the phases of a
step always add up to its wall time, which is what makes a "share of the step" meaningful.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter

PHASES = ("data_wait", "h2d_copy", "forward", "backward", "optimizer", "other")


@dataclass
class StepRecord:
    """One step between two optimizer steps (or two ``p.step()`` calls)."""

    start_s: float
    wall_s: float
    phase_s: dict[str, float]
    memory_bytes: float | None = None
    sync_calls: int = 0
    sync_wait_s: float = 0.0
    h2d_bytes: int = 0
    h2d_pageable_bytes: int = 0
    gpu_phase_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "start_s": self.start_s, "wall_s": self.wall_s, "phase_s": self.phase_s, "memory_bytes": self.memory_bytes,
            "sync_calls": self.sync_calls, "sync_wait_s": self.sync_wait_s, "h2d_bytes": self.h2d_bytes,
            "h2d_pageable_bytes": self.h2d_pageable_bytes, "gpu_phase_s": self.gpu_phase_s,
        }


class PhaseTimer:
    """A stack of open phases; time goes to the top of the stack. Not thread-safe by design:
    only the training thread calls it (hooks running on other threads are ignored by the caller)."""

    __slots__ = ("stack", "acc", "mark", "step_start", "clock")

    def __init__(self, clock=perf_counter) -> None:
        self.clock = clock
        self.stack: list[str] = []
        self.acc = dict.fromkeys(PHASES, 0.0)
        self.mark = 0.0
        self.step_start: float | None = None

    def _charge(self, now: float) -> None:
        if self.stack:
            self.acc[self.stack[-1]] += now - self.mark
        self.mark = now

    def push(self, phase: str, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        if self.step_start is None:  # the first step starts at the first activity, not at import time
            self.step_start = now
        self._charge(now)
        self.stack.append(phase)

    def pop(self, phase: str, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self._charge(now)
        # Pop down to the phase (tolerates a hook that never closed, e.g. an exception mid-phase).
        while self.stack:
            if self.stack.pop() == phase:
                break

    def reassign(self, phase: str, seconds: float) -> None:
        """The last ``seconds`` belong to ``phase`` rather than to the open phase (a copy found inside forward)."""
        self._charge(self.clock())
        if self.stack:
            self.acc[self.stack[-1]] -= seconds
        self.acc[phase] += seconds

    @property
    def current(self) -> str | None:
        return self.stack[-1] if self.stack else None

    def boundary(self, now: float | None = None) -> tuple[float, float, dict[str, float]] | None:
        """Close the step: (start, wall, exclusive phase seconds incl. 'other'); None before any activity."""
        now = self.clock() if now is None else now
        if self.step_start is None:
            self.step_start = now
            return None
        self._charge(now)
        wall = now - self.step_start
        phases = {k: v for k, v in self.acc.items() if k != "other"}
        phases["other"] = max(0.0, wall - sum(phases.values()))
        start = self.step_start
        self.acc = dict.fromkeys(PHASES, 0.0)
        self.step_start = now
        return start, wall, phases
