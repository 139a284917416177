"""Communication kernels and how much of them compute hides.

Overlap follows HTA's definition (CommunicationAnalysis.get_comm_comp_overlap): the time compute
kernels run while communication kernels run, as a share of communication time. What is not
hidden is "exposed" communication: the device does nothing but communicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuwise.trace.breakdown import merge_intervals
from gpuwise.trace.hta_selection import unique_rows
from gpuwise.trace.table import EventTable, distinct
from gpuwise.trace.taxonomy import kernel_category

__all__ = ["CommStats", "comm_stats", "comm_types", "overlap_length"]


@dataclass
class CommStats:
    """Communication kernels (NCCL) of one rank: their time (µs, union), the share compute
    hides (overlap %), the share of the device span left exposed, and ms per step."""

    kernels: int
    time_us: float  # union of communication kernel time
    overlap_pct: float | None  # share of communication time overlapped by compute
    exposed_pct: float | None  # communication not overlapped, share of the device span
    ms_per_step: float | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: time in µs (3 decimals), shares and ms per step (4 decimals)."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "kernels": self.kernels,
            "time_us": round(self.time_us, 3),
            "overlap_pct": r(self.overlap_pct),
            "exposed_pct": r(self.exposed_pct),
            "ms_per_step": r(self.ms_per_step),
        }


def overlap_length(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray) -> float:
    """Length of (union of a) ∩ (union of b)."""
    a_s, a_e = merge_intervals(a_start, a_end)
    b_s, b_e = merge_intervals(b_start, b_end)
    if not a_s.size or not b_s.size:
        return 0.0
    covered = np.concatenate([[0.0], np.cumsum(b_e - b_s)])

    def coverage(x: np.ndarray) -> np.ndarray:  # length of union(b) below x
        k = np.searchsorted(b_s, x, side="right")
        inside = np.where(
            k > 0, np.clip(x - b_s[np.maximum(k - 1, 0)], 0, (b_e - b_s)[np.maximum(k - 1, 0)]), 0.0
        )
        return covered[np.maximum(k - 1, 0)] * (k > 0) + inside

    return float((coverage(a_e) - coverage(a_s)).sum())


def comm_types(t: EventTable, hta_types: np.ndarray) -> np.ndarray:
    """HTA's kernel types with the communication kernels its `^nccl.*Kernel` misses (the taxonomy's
    communication rows: DeepEP, NVSHMEM, MSCCL++, multimem, custom all-reduce, all-to-all) counted
    as communication: for gpuwise's own communication analysis,
    while the HTA columns keep HTA's types."""
    out = hta_types.copy()
    for code in distinct(t.name[t.stream != -1]).tolist():
        if out[code] != 1 and kernel_category(t.name_of(code)) == "communication":
            out[code] = 1
    return out


def comm_stats(
    t: EventTable,
    rows: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    hta_types: np.ndarray,
    span_us: float | None,
    steps_in_window: int,
) -> CommStats:
    """``hta_types``: kernel type per name code (0 computation, 1 communication), as `comm_types`."""
    rows = unique_rows(rows)
    rows = rows[t.stream[rows] != -1]
    kind = hta_types[t.name[rows]]
    comm, comp = rows[kind == 1], rows[kind == 0]
    if not comm.size:
        return CommStats(0, 0.0, None, None, None)
    c_s, c_e = merge_intervals(ts[comm], end[comm])
    comm_us = float((c_e - c_s).sum())
    overlap = overlap_length(ts[comm], end[comm], ts[comp], end[comp])
    return CommStats(
        kernels=int(comm.size),
        time_us=comm_us,
        overlap_pct=100.0 * overlap / comm_us if comm_us > 0 else None,
        exposed_pct=100.0 * (comm_us - overlap) / span_us if span_us else None,
        ms_per_step=comm_us / 1000 / steps_in_window if steps_in_window else None,
    )
