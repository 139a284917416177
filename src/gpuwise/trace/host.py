"""The host side: synchronizing calls, kernel launches and how busy the launching thread is.

A synchronizing runtime call (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, a blocking
``cudaMemcpy`` — what ``.item()``, ``.cpu()`` and ``print(tensor)`` turn into) stops the host from
queueing work ahead. Launch delay is the time from the launch call to the kernel's start on the
device: small when the host runs ahead, growing when the GPU is the bottleneck.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuwise.trace.breakdown import union_length
from gpuwise.trace.hta_selection import unique_rows
from gpuwise.trace.kernels import KERNEL_CATS
from gpuwise.trace.steps import Steps, cpu_complete_events, in_steps
from gpuwise.trace.table import EventTable, percentile
from gpuwise.trace.taxonomy import HOST_BLOCKING_ROLES, api_role

__all__ = ["RUNTIME_CATS", "LaunchStats", "SyncStats", "launch_stats", "sync_stats"]

RUNTIME_CATS = ("cuda_runtime", "Runtime", "cuda_driver", "mtia_runtime")
_LAUNCH_RE = re.compile(r"Launch|launch")


@dataclass
class SyncStats:
    """Host-device synchronizing runtime calls of one rank: how many (per step), their time (ms),
    the share of step time spent in them, counts by name; `scope` says whether inside steps or
    over the whole trace (no ProfilerStep)."""

    calls: int
    calls_per_step: float | None
    time_ms: float
    wait_pct: float | None  # share of step time the host spends in synchronizing calls
    by_name: dict[str, int]
    scope: str  # 'steps' or 'trace'

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: per-step counts to 3 decimals, time and share to 4."""
        return {
            "calls": self.calls,
            "calls_per_step": None if self.calls_per_step is None else round(self.calls_per_step, 3),
            "time_ms": round(self.time_ms, 4),
            "wait_pct": None if self.wait_pct is None else round(self.wait_pct, 4),
            "by_name": self.by_name,
            "scope": self.scope,
        }


@dataclass
class LaunchStats:
    """Kernel launches of one rank: launches and kernels (per step), launch API time and
    launch-to-start delay (µs), and how busy the launching thread is (% of the device span)."""

    launches: int  # launch calls linked to a kernel
    kernels: int  # kernels in the analysis window
    kernels_per_step: float | None
    launch_api_mean_us: float | None
    launch_delay_median_us: float | None
    launch_delay_p90_us: float | None
    host_busy_pct: float | None  # launching thread busy share of the device span
    launch_thread: Any

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: times and shares to 3 decimals."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        return {
            "launches": self.launches,
            "kernels": self.kernels,
            "kernels_per_step": r(self.kernels_per_step),
            "launch_api_mean_us": r(self.launch_api_mean_us),
            "launch_delay_median_us": r(self.launch_delay_median_us),
            "launch_delay_p90_us": r(self.launch_delay_p90_us),
            "host_busy_pct": r(self.host_busy_pct),
            "launch_thread": self.launch_thread,
        }


def sync_stats(t: EventTable, steps: Steps) -> SyncStats:
    """Synchronizing runtime calls (the taxonomy's host-blocking roles: cudaDeviceSynchronize,
    cudaStreamSynchronize, blocking cudaMemcpy, hipMemcpyWithStream, ...) inside the steps, or over
    the trace when it has no ProfilerStep."""
    calls = np.flatnonzero(t.cat_mask(*RUNTIME_CATS) & cpu_complete_events(t))
    rows = t.rows_named(calls, lambda s: api_role(s) in HOST_BLOCKING_ROLES)
    scope = "trace"
    if steps.count:
        rows = rows[in_steps(t.ts[rows], steps)]
        scope = "steps"
    names, counts = np.unique(t.name[rows], return_counts=True)
    time_us = float(t.dur[rows].sum())
    total = float(steps.dur_us.sum()) if steps.count else None
    return SyncStats(
        calls=int(rows.size),
        calls_per_step=rows.size / steps.count if steps.count else None,
        time_ms=time_us / 1000,
        wait_pct=100.0 * time_us / total if total else None,
        by_name={t.name_of(int(c)): int(n) for c, n in zip(names, counts, strict=True)},
        scope=scope,
    )


def _match_by_correlation(keys: np.ndarray, rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For each query id, the row whose key equals it (-1 if none)."""
    if not keys.size:
        return np.full(queries.shape, -1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    pos = np.minimum(np.searchsorted(sorted_keys, queries), keys.size - 1)
    return np.where(sorted_keys[pos] == queries, rows[order][pos], -1)


def launch_stats(
    t: EventTable, kernel_rows: np.ndarray, steps_in_window: int, span_us: float | None
) -> LaunchStats:
    """``kernel_rows``: kernels in the analysis window; launch calls are found by correlation id."""
    kernel_rows = unique_rows(kernel_rows)
    kernel_rows = kernel_rows[t.cat_mask(*KERNEL_CATS)[kernel_rows]]
    calls = np.flatnonzero(t.cat_mask(*RUNTIME_CATS) & (t.correlation >= 0) & cpu_complete_events(t))
    runtime = t.rows_named(calls, _LAUNCH_RE.search)
    launch_of = _match_by_correlation(t.correlation[runtime], runtime, t.correlation[kernel_rows])
    linked = launch_of >= 0
    launch_rows = launch_of[linked]
    delay = t.ts[kernel_rows[linked]] - t.ts[launch_rows]
    api = t.dur[launch_rows]
    thread, busy = None, None
    if launch_rows.size:
        tids, counts = np.unique(t.tid[launch_rows], return_counts=True)
        tid = int(tids[np.argmax(counts)])
        thread = t.tids[tid]
        if span_us:
            first, last = (
                float(t.ts[kernel_rows].min()),
                float((t.ts[kernel_rows] + t.dur[kernel_rows]).max()),
            )
            on_thread = np.flatnonzero(
                (t.tid == tid) & cpu_complete_events(t) & (t.ts < last) & (t.ts + t.dur > first)
            )
            start = np.clip(t.ts[on_thread], first, last)
            end = np.clip(t.ts[on_thread] + t.dur[on_thread], first, last)
            busy = 100.0 * union_length(start, end) / (last - first) if last > first else None
    return LaunchStats(
        launches=int(launch_rows.size),
        kernels=int(kernel_rows.size),
        kernels_per_step=kernel_rows.size / steps_in_window if steps_in_window else None,
        launch_api_mean_us=float(api.mean()) if api.size else None,
        launch_delay_median_us=percentile(delay, 50) if delay.size else None,
        launch_delay_p90_us=percentile(delay, 90) if delay.size else None,
        host_busy_pct=busy,
        launch_thread=thread,
    )
