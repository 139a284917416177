"""Temporal breakdown and per-stream idle breakdown, with HTA's definitions.

Temporal (HTA BreakdownAnalysis.get_temporal_breakdown): over the rows on a stream (stream != -1),
span = end of the last - start of the first; idle = span - union of all intervals; compute = union
of the intervals of "computation" kernels (not NCCL, Memcpy, Memset, dma, *Sync); non-compute =
the rest. Idle (BreakdownAnalysis._analyze_idle_time_for_stream): on each stream, the gap before
each kernel/memcpy/memset is host wait if its launch came after the previous one ended, kernel wait
if shorter than 30 µs, otherwise other.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from gpuwise.trace.hta_selection import HtaView, unique_rows
from gpuwise.trace.table import EventTable, distinct

__all__ = [
    "CONSECUTIVE_KERNEL_DELAY_US",
    "IDLE_KERNEL_CATS",
    "StreamIdle",
    "TemporalBreakdown",
    "hta_kernel_type",
    "idle_by_stream",
    "kernel_type_by_code",
    "merge_intervals",
    "temporal_breakdown",
    "union_length",
]

# HTA hta/utils/utils.py kernel classes (regexes matched at the start of the name, as re.match does).
_COMM_RE = re.compile(r"^nccl.*Kernel")
_MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
# HTA get_idle_time_breakdown: only these categories are kernels for the idle analysis.
IDLE_KERNEL_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")
CONSECUTIVE_KERNEL_DELAY_US = 30  # HTA default for get_idle_time_breakdown


@lru_cache(maxsize=1 << 14)  # per distinct name: a worker sees the same kernels in every rank
def hta_kernel_type(name: str) -> str:
    """HTA's kernel type by name: "communication" (nccl*Kernel), "memory" (Memcpy, Memset, dma),
    "computation" (anything not communication, copy or sync), else "other"."""
    if _COMM_RE.match(name):
        return "communication"
    if _MEMORY_RE.match(name):
        return "memory"
    if not _NOT_COMPUTE_RE.match(name):
        return "computation"
    return "other"


@dataclass
class TemporalBreakdown:
    """HTA's temporal breakdown of one rank: idle, compute and non-compute time (µs) over the
    device span (first start to last end on any stream), and each as % of the span."""

    idle_pct: float
    compute_pct: float
    non_compute_pct: float
    span_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float

    @property
    def degenerate(self) -> bool:
        """No positive, finite span (a sub-µs trace rounds to end before it starts): shares of it mean
        nothing, so no finding may rest on them."""
        return not (0 < self.span_us < math.inf)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: every field rounded to 4 decimals."""
        return {k: round(v, 4) for k, v in asdict(self).items()}


@dataclass
class StreamIdle:
    """Idle time on one stream (µs), split as HTA splits it: waiting for the host to launch,
    short gaps between kernels (< 30 µs), and other; `kernels` counts the stream's device ops."""

    stream: int
    host_wait_us: float
    kernel_wait_us: float
    other_us: float
    kernels: int

    @property
    def idle_us(self) -> float:
        """All idle time on the stream, µs."""
        return self.host_wait_us + self.kernel_wait_us + self.other_us

    def ratio(self, category: str) -> float | None:
        """`category` ("host_wait", "kernel_wait", "other") as a fraction (0-1) of the idle time;
        None when the stream never idles."""
        total = self.idle_us
        return None if total <= 0 else getattr(self, f"{category}_us") / total

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: times in µs (3 decimals) and each category's ratio (4 decimals)."""
        return {
            "stream": self.stream,
            "kernels": self.kernels,
            "idle_us": round(self.idle_us, 3),
            "host_wait_us": round(self.host_wait_us, 3),
            "kernel_wait_us": round(self.kernel_wait_us, 3),
            "other_us": round(self.other_us, 3),
            **{
                f"{c}_ratio": (None if (r := self.ratio(c)) is None else round(r, 4))
                for c in ("host_wait", "kernel_wait", "other")
            },
        }


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals (touching ones merge, as in HTA's merge_kernel_intervals)."""
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    running_end = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > running_end[:-1]
    firsts = np.flatnonzero(new)
    return s[firsts], np.maximum.reduceat(e, firsts)


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of the intervals [start, end) (same-length arrays, µs): overlapping
    kernels count once."""
    s, e = merge_intervals(start, end)
    return float((e - s).sum())


def kernel_type_by_code(t: EventTable) -> np.ndarray:
    """HTA kernel type per name code: 0 computation, 1 communication, 2 memory, 3 other.

    Only names seen on a device stream are classified (CPU op names never reach HTA's kernel types).
    """
    index = {"computation": 0, "communication": 1, "memory": 2, "other": 3}
    out = np.full(len(t.names), 3, dtype=np.int8)
    for code in distinct(t.name[t.stream != -1]).tolist():
        out[code] = index[hta_kernel_type(t.name_of(code))]
    return out


def temporal_breakdown(t: EventTable, view: HtaView, types: np.ndarray) -> TemporalBreakdown | None:
    """None when no event runs on a device stream (a CPU-only trace)."""
    rows = unique_rows(view.rows)
    rows = rows[t.stream[rows] != -1]
    if rows.size == 0:
        return None
    start, end = view.ts[rows], view.end[rows]
    merged_s, merged_e = merge_intervals(start, end)
    span = float(merged_e[-1] - merged_s[0]) if merged_e.size else 0.0
    busy = float((merged_e - merged_s).sum())
    idle = span - busy
    compute_rows = types[t.name[rows]] == 0
    compute = union_length(start[compute_rows], end[compute_rows])
    non_compute = span - compute - idle
    if span <= 0:
        return TemporalBreakdown(0.0, 0.0, 0.0, span, idle, compute, non_compute)
    return TemporalBreakdown(
        100 * idle / span, 100 * compute / span, 100 * non_compute / span, span, idle, compute, non_compute
    )


def idle_by_stream(
    t: EventTable, view: HtaView, delay_us: float = CONSECUTIVE_KERNEL_DELAY_US
) -> list[StreamIdle]:
    """HTA's idle-time split per stream. A row HTA's merge holds m times adds m - 1 back-to-back copies
    of itself: each a gap of -dur after its own end, counted as HTA counts it (reckoned, not materialized)."""
    kernel_cat = t.cat_mask(*IDLE_KERNEL_CATS)
    keep = (t.stream[view.rows] != -1) & kernel_cat[view.rows]
    rows = view.rows[keep]
    if rows.size == 0:
        return []
    extra = (view.copies[keep] - 1) if view.copies is not None else np.zeros(rows.size, dtype=np.int64)
    # The launch's timestamp, when the linked row is among the kept rows (HTA joins on the row index).
    present = view.present(t.num_events)
    link = view.index_correlation[rows]
    # Link 0 means "launch not in the trace"; HTA still joins it to traceEvents[0] when that row is kept.
    linked = (link >= 0) & present[np.maximum(link, 0)] & ((link > 0) | t.first_event_is_row0)
    ts_runtime = np.where(linked, view.ts[np.maximum(link, 0)], np.nan)
    out = []
    streams = t.stream[rows]
    for stream in distinct(streams):
        on = streams == stream
        ts, end, launch, more = view.ts[rows[on]], view.end[rows[on]], ts_runtime[on], extra[on]
        order = np.argsort(ts, kind="stable")
        ts, end, launch, more = ts[order], end[order], launch[order], more[order]
        prev_end = np.concatenate([[np.nan], end[:-1]])
        gap = ts - prev_end
        with np.errstate(invalid="ignore"):
            host = launch > prev_end
            kernel = ~host & (gap < delay_us)
            # the repeated copies: previous end is the row's own end
            self_gap = (ts - end) * more
            self_host = launch > end
            self_kernel = ~self_host & (ts - end < delay_us)
        other = ~host & ~kernel
        self_other = ~self_host & ~self_kernel
        out.append(
            StreamIdle(
                int(stream),
                float(np.nansum(gap[host]) + np.nansum(self_gap[self_host])),
                float(np.nansum(gap[kernel]) + np.nansum(self_gap[self_kernel])),
                float(np.nansum(gap[other]) + np.nansum(self_gap[self_other])),
                int(on.sum() + more.sum()),
            )
        )
    return out
