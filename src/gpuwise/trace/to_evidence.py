"""Turn trace measurements into the shared `Evidence` the rule engine reads (source="trace")."""

from __future__ import annotations

from typing import Literal

from gpuwise.catalog import get_gpu
from gpuwise.diagnose import Evidence
from gpuwise.diagnose.evidence import (
    Communication,
    DeviceActivity,
    InputPipeline,
    MemoryUse,
    Precision,
    RunContext,
    StepTimes,
    WorkloadKind,
)
from gpuwise.errors import GpuwiseError
from gpuwise.trace.cross_rank import CrossRank
from gpuwise.trace.rank import RankAnalysis

__all__ = ["combined_kind", "cross_rank_evidence", "rank_evidence"]


def _tensor_cores(catalog_id: str | None) -> tuple[float | None, Literal["bf16", "fp16"] | None]:
    """(16-bit dense peak / fp32 peak, which 16-bit type): bf16 where the GPU has it, else fp16 (V100, T4)."""
    if not catalog_id:
        return None, None
    try:
        gpu = get_gpu(catalog_id)
    except GpuwiseError:
        return None, None
    dtype: Literal["bf16", "fp16"] = "bf16" if gpu.bf16_tflops else "fp16"
    low = gpu.bf16_tflops or gpu.fp16_tflops
    return (low / gpu.fp32_tflops if low and gpu.fp32_tflops else None), dtype


def _fp32_matmul_time_pct(r: RankAnalysis) -> float | None:
    """fp32 matmul/conv kernel time over the device span of the same window: Amdahl's fraction."""
    t = r.temporal
    if t is None or t.degenerate or "fp32" not in r.kernels.precision_us:
        return None
    return min(100.0, 100.0 * r.kernels.precision_us["fp32"] / t.span_us)


def _timeline_activity(r: RankAnalysis, activity: DeviceActivity) -> None:
    """Fill ``activity`` from the rank's timeline (trace.timeline): idle and compute over the steps' host
    spans less one-off gaps, the idle syncs and launch gaps cause.

    With most device events of negative duration the GPU timings cannot be trusted: no idle or
    utilization share is given, so no utilization finding rests on them."""
    tl = r.timeline
    if tl is None:
        return
    if tl.negative_kernel_pct >= 50.0:
        activity.gpu_idle_pct = activity.gpu_util_pct = None
        return
    activity.gpu_idle_pct = tl.idle_pct
    activity.gpu_util_pct = tl.compute_pct
    activity.sync_idle_pct = tl.share_pct(tl.idle_by_cause_us["sync"])
    activity.sync_idle_call = tl.sync_top
    activity.launch_idle_pct = tl.share_pct(tl.idle_by_cause_us["launch"])
    activity.one_off_idle_pct = 100.0 * tl.one_off_us / tl.window_us if tl.window_us > 0 else None
    activity.graph_replay_pct = tl.graph_replay_pct
    activity.before_first_kernel_pct = (
        tl.share_pct(tl.before_first_kernel_us) if tl.window == "steps" else None
    )


def rank_evidence(r: RankAnalysis) -> Evidence:
    """One rank's analysis as the Evidence the diagnosis rules read (source "trace"); a degenerate
    breakdown contributes no shares."""
    k, s = r.kernels, r.steps
    t = r.temporal if r.temporal and not r.temporal.degenerate else None
    memory_peak = r.memory.peak_reserved_bytes or r.memory.peak_allocated_bytes if r.memory else None
    notes = list(r.warnings) + list(s.notes) + list(k.notes)
    speedup, dtype = _tensor_cores(r.device.catalog_id)
    if r.device.catalog_note:
        notes.append(r.device.catalog_note)
    if r.memory and r.memory.source == "allocation deltas":
        notes.append(
            "this trace records allocation deltas only: absolute peak memory is unknown "
            f"(growth within the trace: {(r.memory.window_growth_peak_bytes or 0) / 2**30:.2f} GiB)"
        )
    activity = DeviceActivity(
        sync_calls_per_step=r.sync.calls_per_step,
        sync_wait_pct=r.sync.wait_pct,
        kernels_per_step=r.launches.kernels_per_step,
        tiny_kernel_pct=k.tiny_kernel_pct,
        gpu_idle_pct=t.idle_pct if t else None,
        gpu_util_pct=t.compute_pct if t else None,
        host_busy_pct=r.launches.host_busy_pct,
        h2d_copy_pct=r.copies.h2d_copy_pct,
        pageable_copy_pct=r.copies.pageable_copy_pct,
    )
    if t is not None:
        _timeline_activity(r, activity)
    return Evidence(
        source="trace",
        label=r.file,
        rank=r.rank.rank,
        device=r.device.kind,
        gpu=r.device.catalog_id or (r.device.name or ""),
        steps=StepTimes(
            num_steps=s.count or None,
            step_time_s=s.mean_ms / 1000 if s.mean_ms is not None else None,
            step_times_s=list(s.step_times_s),
            phase_s={"data_wait": s.loader_ms_per_step / 1000} if s.loader_ms_per_step is not None else {},
        ),
        loader=InputPipeline(
            input_wait_pct=s.input_wait_pct,
            # _SingleProcessDataLoaderIter is what DataLoader(num_workers=0) iterates with
            loader_num_workers=0 if s.loader_kind == "single-process" else None,
        ),
        activity=activity,
        precision=Precision(
            fp32_matmul_pct=k.fp32_matmul_pct,
            fp32_matmul_time_pct=_fp32_matmul_time_pct(r),
            amp_enabled=True if k.amp_ops_seen else None,
            tensor_core_speedup=speedup,
            tensor_core_dtype=dtype,
        ),
        memory=MemoryUse(memory_capacity_bytes=r.device.memory_bytes, memory_peak_bytes=memory_peak),
        comm=Communication(comm_exposed_pct=r.comm.exposed_pct, comm_overlap_pct=r.comm.overlap_pct),
        context=RunContext(workload_kind=r.workload_kind, framework=r.framework or None),
        notes=notes,
    )


def combined_kind(kinds: list[WorkloadKind]) -> WorkloadKind:
    """The ranks' work as one kind: training if any rank trains, inference if every rank is inference,
    else unknown."""
    if "training" in kinds:
        return "training"
    return "inference" if kinds and all(k == "inference" for k in kinds) else "unknown"


def cross_rank_evidence(c: CrossRank, kind: WorkloadKind = "unknown") -> Evidence | None:
    """Cross-rank evidence (step time per rank, communication spread) for the straggler rules, of the
    ranks' combined ``kind``; None with fewer than two ranks timed."""
    if len(c.rank_step_time_s) < 2:
        return None
    return Evidence(
        source="trace",
        label="cross-rank",
        context=RunContext(workload_kind=kind),
        comm=Communication(
            world_size=c.world_size,
            rank_step_time_s=dict(c.rank_step_time_s),
            rank_comm_time_s={rank: ms / 1000 for rank, ms in c.comm_ms_per_step.items()},
        ),
        notes=list(c.notes),
    )
