"""Where host time outside every phase goes: the training thread's Python frames, sampled.

A daemon thread wakes every ``SAMPLE_EVERY_S`` (20 Hz) and, when the event log's last entry is not a phase
being entered (the training thread may be between phases), reads the training thread's current
frame with ``sys._current_frames()``. Each sample is a timestamp and two frames: the innermost one
in the user's code (not the standard library, site-packages or gpuwise) and the innermost one
overall. The hooks' hot path is unchanged: the sampler only reads the log. Which gap a sample fell
in (``host_input`` or ``other``, or none: a phase) is decided exactly at replay, by its time
(``PhaseTimer.sampled``).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any

from gpuwise.profile.event_log import EventLog
from gpuwise.profile.phases import EXIT

# 20 Hz: a wake costs ~50 µs of CPU on a loaded VM (thread wake-up and the GIL; a frame walk adds
# ~20 µs): 0.47 % of one core measured at 100 Hz, 0.27 % at 50 Hz, so ~0.1 % here. The cost is per
# second of wall time, so on an oversubscribed machine it weighs more per step; at 100 Hz
# profile_overhead.py read +1.87 % there. 20 gaps of 30 ms still give ~12 samples to name a function.
SAMPLE_EVERY_S = 0.05
MAX_DEPTH = 48  # frames walked per sample; deeper stacks keep their innermost frames
TOP_FRAMES = 8  # frames kept per gap phase in the record


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # gpuwise itself
    roots.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(sorted(r for r in roots if r))


class FrameSampler:
    """A daemon thread sampling the training thread's Python frames every ``SAMPLE_EVERY_S`` (s) while the
    thread is between phases; ``training_thread`` returns its id (None: not known yet).
    """

    def __init__(self, events: EventLog, training_thread: Callable[[], int | None]) -> None:
        self.events = events
        self.training_thread = training_thread
        self.interval_s = SAMPLE_EVERY_S
        self._roots = _library_roots()
        self._is_user: dict[str, bool] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the sampling thread."""
        self._thread = threading.Thread(target=self._run, name="gpuwise-frames", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the sampling thread, waiting up to 1 s for it (never from the thread itself)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)

    def _run(self) -> None:
        entries = self.events.entries
        samples = self.events.samples
        while not self._stop.wait(self.interval_s):
            tid = self.training_thread()
            if tid is None:
                continue
            n = len(entries)
            if n and entries[n - 1 - (n + 1) % 2] < EXIT:  # the last code entered a phase: not a gap
                continue
            frame = sys._current_frames().get(tid)
            if frame is not None:
                samples.append((perf_counter(), self.describe(frame)))

    def describe(self, frame: Any) -> tuple[str, str]:
        """(innermost user frame, innermost frame) as ``file:line function``; '' when no user frame."""
        leaf = _where(frame)
        depth = 0
        while frame is not None and depth < MAX_DEPTH:
            filename = frame.f_code.co_filename
            user = self._is_user.get(filename)
            if user is None:
                user = self._is_user[filename] = not filename.startswith(("<", *self._roots))
            if user:
                return _where(frame), leaf
            frame = frame.f_back
            depth += 1
        return "", leaf


def _where(frame: Any) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} {frame.f_code.co_name}"


def top_frames(counts: dict[tuple[str, str, str], int], interval_s: float) -> dict[str, Any]:
    """The record's form: per gap phase, its samples and the most sampled (user, leaf) frames."""
    totals: dict[str, int] = {}
    for (phase, _, _), n in counts.items():
        totals[phase] = totals.get(phase, 0) + n
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    rows = [row for phase in totals for row in [r for r in ranked if r[0][0] == phase][:TOP_FRAMES]]
    return {
        "interval_s": interval_s,
        "samples": totals,
        "top": [
            {"phase": phase, "frame": user, "leaf": leaf, "samples": n} for (phase, user, leaf), n in rows
        ],
    }


__all__ = ["FrameSampler", "top_frames"]
