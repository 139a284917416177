"""GPU-side phase times from CUDA events, resolved without stalling the training loop.

Host clocks only say when work was *queued*; on a GPU the forward of step n may run while the
host already waits for batch n+1. Each phase records a start and an end event on the current
stream. Pending pairs are resolved with ``Event.query()`` (non-blocking) at step boundaries;
only ``finish()`` waits, on the last event, once.
"""

from __future__ import annotations

from collections import deque
from typing import Any

TIMED = ("h2d_copy", "forward", "backward", "optimizer")


class CudaPhaseTimer:
    """CUDA-event start/end pairs per phase, resolved into ``per_step``: step index → phase → GPU seconds."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._open: dict[str, Any] = {}
        self._pending: deque[tuple[int, str, Any, Any]] = deque()
        self.per_step: dict[int, dict[str, float]] = {}

    def begin(self, phase: str) -> None:
        """Record a start event for ``phase`` on the current stream (only the timed phases; a phase already
        open is not restarted).
        """
        if phase in TIMED and phase not in self._open:
            ev = self._torch.cuda.Event(enable_timing=True)
            ev.record()
            self._open[phase] = ev

    def end(self, phase: str, step: int) -> None:
        """Record the end event of ``phase`` and queue the pair for ``step``; no-op when the phase was not
        begun.
        """
        start = self._open.pop(phase, None)
        if start is None:
            return
        end = self._torch.cuda.Event(enable_timing=True)
        end.record()
        self._pending.append((step, phase, start, end))

    def drain(self, wait: bool = False) -> None:
        """Move completed event pairs into ``per_step``, in order, stopping at the first not yet done; with
        ``wait`` it first synchronizes on the last event so every pair resolves.
        """
        if wait and self._pending:
            self._pending[-1][3].synchronize()  # events on one stream complete in order
        while self._pending:
            step, phase, start, end = self._pending[0]
            if not wait and not end.query():
                break
            self._pending.popleft()
            seconds = start.elapsed_time(end) / 1000.0  # elapsed_time is in milliseconds
            bucket = self.per_step.setdefault(step, {})
            bucket[phase] = bucket.get(phase, 0.0) + seconds

    def finish(self) -> dict[int, dict[str, float]]:
        """Drop unclosed phases, wait for the last event, and return ``per_step`` (step → phase → s)."""
        self._open.clear()
        self.drain(wait=True)
        return self.per_step


__all__ = ["CudaPhaseTimer"]
