"""Training steps (``ProfilerStep#N``) and the data loader's share of them.

``torch.profiler.profile(schedule=...)`` wraps each ``prof.step()`` interval in a
``ProfilerStep#N`` CPU annotation; the DataLoader's ``__next__`` appears inside it as
``enumerate(DataLoader)#<Iter>.__next__``. Time in ``__next__`` is time the loop waits for data
(with workers, only what the workers could not prepare ahead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from gpuwise.trace.breakdown import union_length
from gpuwise.trace.table import EventTable, distinct, percentile

__all__ = ["StepStats", "Steps", "cpu_complete_events", "find_steps", "in_steps", "step_stats"]

_STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
_LOADER_RE = re.compile(r"DataLoader.*__next__|dataloader.*next", re.I)


@lru_cache(maxsize=1 << 14)
def _is_step(name: str) -> bool:
    """A ``ProfilerStep#N`` annotation; memoized per distinct name, as `_is_loader`."""
    return _STEP_RE.match(name) is not None


@lru_cache(maxsize=1 << 14)
def _is_loader(name: str) -> bool:
    """A data loader's ``__next__``; memoized per distinct name (a worker sees the same names in every rank,
    and this case-blind search costs ~5 µs per name)."""
    return _LOADER_RE.search(name) is not None


@dataclass
class Steps:
    """The ProfilerStep annotations of the analysis window: step numbers, start and duration (µs)."""

    numbers: list[int]
    start_us: np.ndarray
    dur_us: np.ndarray

    @property
    def count(self) -> int:
        """Number of steps in the window."""
        return len(self.numbers)

    @property
    def end_us(self) -> np.ndarray:
        """Each step's end, µs."""
        return self.start_us + self.dur_us


@dataclass
class StepStats:
    """Step times (s each; mean, median, p90, min, max, std in ms) and the data loader's share:
    time in DataLoader.__next__ as % of step time, ms per step, and single- or multi-process."""

    count: int
    numbers: list[int]
    step_times_s: list[float]
    mean_ms: float | None
    median_ms: float | None
    p90_ms: float | None
    min_ms: float | None
    max_ms: float | None
    std_ms: float | None
    input_wait_pct: float | None  # DataLoader __next__ time / step time
    loader_ms_per_step: float | None
    loader_kind: (
        str  # 'single-process' (num_workers=0), 'multi-process', or '' when no loader ops were traced
    )
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: times rounded to 4 decimals (step times in s to 7)."""

        def r(x: float | None, n: int = 4) -> float | None:
            return None if x is None else round(x, n)

        return {
            "count": self.count,
            "numbers": self.numbers,
            "step_times_s": [round(x, 7) for x in self.step_times_s],
            "mean_ms": r(self.mean_ms),
            "median_ms": r(self.median_ms),
            "p90_ms": r(self.p90_ms),
            "min_ms": r(self.min_ms),
            "max_ms": r(self.max_ms),
            "std_ms": r(self.std_ms),
            "input_wait_pct": r(self.input_wait_pct),
            "loader_ms_per_step": r(self.loader_ms_per_step),
            "loader_kind": self.loader_kind,
            "notes": self.notes,
        }


def cpu_complete_events(t: EventTable) -> np.ndarray:
    """Mask of host-side complete events (no device stream) with a valid duration."""
    return (t.stream == -1) & (t.dur >= 0) & np.isfinite(t.ts)


def find_steps(t: EventTable) -> Steps:
    """One entry per step number (the longest annotation if a step is recorded twice), by start time."""
    codes = t.name_codes(_is_step)
    number_of = {int(c): int(m.group(1)) for c in codes if (m := _STEP_RE.match(t.name_of(int(c))))}
    rows = np.flatnonzero(t.name_mask(codes) & cpu_complete_events(t))
    best: dict[int, int] = {}
    for row in rows.tolist():
        number = number_of[int(t.name[row])]
        if number not in best or t.dur[row] > t.dur[best[number]]:
            best[number] = row
    chosen = sorted(best.items(), key=lambda kv: t.ts[kv[1]])
    return Steps(
        [n for n, _ in chosen],
        t.ts[[r for _, r in chosen]].astype(np.float64),
        t.dur[[r for _, r in chosen]].astype(np.float64),
    )


def in_steps(ts: np.ndarray, steps: Steps) -> np.ndarray:
    """Mask of timestamps that fall inside a step."""
    if not steps.count:
        return np.zeros(ts.shape, dtype=bool)
    order = np.argsort(steps.start_us)
    starts, ends = steps.start_us[order], steps.end_us[order]
    k = np.searchsorted(starts, ts, side="right") - 1
    ok = k >= 0
    inside = np.zeros(ts.shape, dtype=bool)
    inside[ok] = ts[ok] < ends[k[ok]]
    return inside


def step_stats(t: EventTable, steps: Steps) -> StepStats:
    """Step-time statistics and the data loader's wait within `steps`; notes say what could not be
    measured."""
    notes: list[str] = []
    loader_codes = t.name_codes(_is_loader)
    loader_rows = np.flatnonzero(t.name_mask(loader_codes) & cpu_complete_events(t))
    names = {t.name_of(int(c)) for c in distinct(t.name[loader_rows])}
    kind = (
        "multi-process" if any("MultiProcessing" in n for n in names) else ("single-process" if names else "")
    )
    if not steps.count:
        notes.append(
            "no ProfilerStep#N annotations: step statistics need torch.profiler's schedule + prof.step()"
        )
        return StepStats(0, [], [], None, None, None, None, None, None, None, None, kind, notes)
    dur_ms = steps.dur_us / 1000.0
    loader_in = loader_rows[in_steps(t.ts[loader_rows], steps)]
    loader_us = union_length(t.ts[loader_in], t.ts[loader_in] + t.dur[loader_in])
    total_us = float(steps.dur_us.sum())
    return StepStats(
        count=steps.count,
        numbers=steps.numbers,
        step_times_s=(steps.dur_us / 1e6).tolist(),
        mean_ms=float(dur_ms.mean()),
        median_ms=percentile(dur_ms, 50),
        p90_ms=percentile(dur_ms, 90),
        min_ms=float(dur_ms.min()),
        max_ms=float(dur_ms.max()),
        std_ms=float(dur_ms.std()),
        input_wait_pct=100.0 * loader_us / total_us if names and total_us > 0 else None,
        loader_ms_per_step=loader_us / 1000.0 / steps.count if names else None,
        loader_kind=kind,
        notes=notes,
    )
