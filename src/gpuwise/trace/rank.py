"""Everything gpuwise reads from one rank's trace file, computed from one parse."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuwise.diagnose import thresholds
from gpuwise.diagnose.evidence import WorkloadKind
from gpuwise.errors import GpuwiseError
from gpuwise.trace.breakdown import (
    StreamIdle,
    TemporalBreakdown,
    idle_by_stream,
    kernel_type_by_code,
    temporal_breakdown,
)
from gpuwise.trace.comm import CommStats, comm_stats, comm_types
from gpuwise.trace.copies import CopyStats, copy_stats
from gpuwise.trace.device import DeviceInfo, RankInfo, device_info, rank_info
from gpuwise.trace.formats import apply_source, load_table
from gpuwise.trace.host import LaunchStats, SyncStats, launch_stats, sync_stats
from gpuwise.trace.hta_selection import build_view
from gpuwise.trace.kernels import KERNEL_CATS, KernelSummary, summarize_kernels
from gpuwise.trace.memory import MemoryStats, memory_stats
from gpuwise.trace.parser import Progress
from gpuwise.trace.sanitize import drop_out_of_range, recover_streams
from gpuwise.trace.steps import StepStats, find_steps, step_stats
from gpuwise.trace.table import EventTable
from gpuwise.trace.taxonomy import runtime_platform
from gpuwise.trace.timeline import Timeline, timeline
from gpuwise.trace.workload_kind import trace_workload_kind

__all__ = ["RankAnalysis", "analyze_file", "analyze_file_ranks", "analyze_table"]


@dataclass
class RankAnalysis:
    """Everything read from one rank's trace: rank and device, file and parse figures,
    temporal and per-stream idle breakdown, kernels, steps, copies, syncs, launches,
    communication, memory, warnings, and the ids of the findings this rank alone triggers."""

    file: str
    rank: RankInfo
    device: DeviceInfo
    file_bytes: int
    json_bytes: int
    events: int
    parse_s: float
    analyze_s: float
    dropped_last_step: bool
    steps_in_window: int
    temporal: TemporalBreakdown | None
    idle_by_stream: list[StreamIdle]
    kernels: KernelSummary
    steps: StepStats
    copies: CopyStats
    sync: SyncStats
    launches: LaunchStats
    comm: CommStats
    memory: MemoryStats | None
    warnings: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # ids of the findings this rank alone triggers
    workload_kind: WorkloadKind = "unknown"  # training / inference / unknown (trace.workload_kind)
    timeline: Timeline | None = None  # the window's GPU idle by cause (trace.timeline)
    framework: str = ""  # 'jax' / 'tensorflow' when an XPlane or XLA trace names its producer; '' else

    @property
    def label(self) -> str:
        """The rank as "rank N", or the file name when the trace carries no rank."""
        return f"rank {self.rank.rank}" if self.rank.rank is not None else Path(self.file).name

    def to_dict(self) -> dict[str, Any]:
        """One entry of the JSON document's `ranks` (docs/json-schema.md)."""
        return {
            "file": self.file,
            "rank": self.rank.rank,
            "rank_info": self.rank.to_dict(),
            "device": self.device.to_dict(),
            "file_bytes": self.file_bytes,
            "json_bytes": self.json_bytes,
            "events": self.events,
            "parse_s": round(self.parse_s, 4),
            "analyze_s": round(self.analyze_s, 4),
            "window": {"dropped_last_step": self.dropped_last_step, "steps_in_window": self.steps_in_window},
            "temporal_breakdown": self.temporal.to_dict() if self.temporal else None,
            "idle_by_stream": [s.to_dict() for s in self.idle_by_stream],
            "kernels": self.kernels.to_dict(),
            "steps": self.steps.to_dict(),
            "memcpy": self.copies.to_dict(),
            "sync": self.sync.to_dict(),
            "launches": self.launches.to_dict(),
            "communication": self.comm.to_dict(),
            "memory": self.memory.to_dict() if self.memory else None,
            "warnings": self.warnings,
            "findings": self.findings,
            "workload_kind": self.workload_kind,
            "timeline": self.timeline.to_dict() if self.timeline else None,
        }


def analyze_file_ranks(path: str | Path, progress: Progress | None = None) -> list[RankAnalysis]:
    """The ranks one file holds: an Nsight SQLite export of several processes is one rank per process
    (trace/nsys_ranks.py); every other file is one rank (:func:`analyze_file`)."""
    from gpuwise.trace.formats import sniff

    path = Path(path)
    if path.is_file() and sniff(path) == "nsys-sqlite":
        from gpuwise.trace.nsys_ranks import nsys_processes, read_nsys_process

        pids = nsys_processes(path)
        if len(pids) > 1:
            out = []
            for rank, pid in enumerate(pids):
                started = time.perf_counter()
                table = read_nsys_process(path, pid, rank, len(pids))
                parsed = time.perf_counter()
                analysis = analyze_table(table)
                apply_source(analysis, table)
                analysis.parse_s, analysis.analyze_s = parsed - started, time.perf_counter() - parsed
                out.append(analysis)
            return out
    return [analyze_file(path, progress)]


def analyze_file(path: str | Path, progress: Progress | None = None) -> RankAnalysis:
    """Parse and analyze one trace file, timing both (s); `progress` is called with bytes read."""
    started = time.perf_counter()
    table = load_table(path, progress)  # Kineto JSON, Nsight SQLite, XPlane or XLA JSON, told by content
    parsed = time.perf_counter()
    analysis = analyze_table(table)
    apply_source(analysis, table)
    analysis.parse_s = parsed - started
    analysis.analyze_s = time.perf_counter() - parsed
    return analysis


def _phase_warnings(t: EventTable) -> list[str]:
    skipped = {k: n for k, n in t.phase_counts.items() if k in ("B", "E")}
    if skipped:
        return [
            f"{sum(skipped.values()):,} begin/end (ph='B'/'E') events were not analyzed "
            "(only complete 'X' events are)"
        ]
    return []


def analyze_table(t: EventTable) -> RankAnalysis:
    """Analyze an already parsed trace; NumPy warnings on odd values are silenced (they are
    handled where they matter)."""
    with np.errstate(all="ignore"):  # odd values (1e308, NaN) in broken traces are handled, not warned about
        return _analyze(t)


def _analyze(t: EventTable) -> RankAnalysis:
    if t.events_total == 0:
        raise GpuwiseError(
            f"{t.path}: the trace has no events (empty traceEvents): "
            "was the profiler stopped before any step ran?"
        )
    warnings = list(t.warnings) + _phase_warnings(t)
    incomplete = int((np.isnan(t.ts) | np.isnan(t.dur)).sum())
    if incomplete:
        warnings.append(f"{incomplete:,} complete (ph='X') events without a numeric ts or dur were ignored")
    warnings += drop_out_of_range(t) + recover_streams(t)
    view = build_view(t)
    negative = int((t.dur < 0).sum())
    if negative:
        warnings.append(f"{negative:,} events with a negative duration were ignored")
    hta_types = kernel_type_by_code(t)
    temporal = temporal_breakdown(t, view, hta_types)
    steps = find_steps(t)
    window_steps = steps.count
    if view.dropped_last_step and view.last_step_start_us is not None:
        window_steps = int((steps.start_us < view.last_step_start_us).sum())
    kind = "cpu"
    if temporal is not None:
        platform = runtime_platform([n for n in t.names if isinstance(n, str) and len(n) < 128])
        kind = "mtia" if "mtia_ccp_events" in t.cats else (platform or "cuda")
    else:
        warnings.append(
            "no GPU activity in this trace (no kernels, copies or memsets on a device stream): "
            "CPU-side statistics only"
        )
    if temporal is not None and temporal.degenerate:
        warnings.append(
            f"the device events span {temporal.span_us:g} µs once rounded as HTA does: "
            "too short for a breakdown, no finding is drawn from it"
        )
    span = temporal.span_us if temporal and not temporal.degenerate else None
    rank, rank_problems = rank_info(t.metadata, t.path)
    warnings += rank_problems
    kernels = summarize_kernels(t, view.rows, t.dur, thresholds.TINY_KERNEL_US)
    kernel_rows = view.rows[t.cat_mask(*KERNEL_CATS)[view.rows]]
    idle = timeline(t, view, steps, window_steps, hta_types) if span else None
    warnings += idle.notes if idle else []
    if span and temporal is not None and temporal.non_compute_pct < 0:
        warnings.append(
            f"non-compute time came out at {temporal.non_compute_pct:.2f} % (< 0: overlapping events rounded "
            "as HTA does); read it as 0"
        )
    return RankAnalysis(
        file=str(t.path),
        rank=rank,
        device=device_info(t.metadata, kind, [k.name for k in kernels.top]),
        file_bytes=t.file_bytes,
        json_bytes=t.json_bytes,
        events=t.events_total,
        parse_s=0.0,
        analyze_s=0.0,
        dropped_last_step=view.dropped_last_step,
        steps_in_window=window_steps,
        temporal=temporal,
        idle_by_stream=idle_by_stream(t, view),
        kernels=kernels,
        steps=step_stats(t, steps),
        copies=copy_stats(t, view.rows, span),
        sync=sync_stats(t, steps),
        launches=launch_stats(t, kernel_rows, window_steps, span),
        comm=comm_stats(t, view.rows, view.ts, view.end, comm_types(t, hta_types), span, window_steps),
        memory=memory_stats(t.memory),
        warnings=warnings,
        workload_kind=trace_workload_kind(t),
        timeline=idle,
    )
