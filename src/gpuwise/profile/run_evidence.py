"""A profiled run's raw record -> ``Evidence`` for the rules, one section of the record at a time.

Each helper fills the fields one source measures (steps, loader and CPU, CUDA counters, CUDA-event
spans, NVML telemetry, the GPU catalog) and notes what a figure is, so a rule never mistakes an RSS
reading for allocated memory or an NVML peak for the allocator's.
"""

from __future__ import annotations

from typing import Any

from gpuwise.diagnose import Evidence
from gpuwise.diagnose.evidence import kind_from_phases
from gpuwise.diagnose.statistics import outlier_limit_s
from gpuwise.diagnose.thresholds import MIN_STEPS_FOR_STATISTICS
from gpuwise.profile.rank_spread import fill_comm_evidence
from gpuwise.profile.step_stats import gpu_phase_breakdown, phase_breakdown


def match_catalog_gpu(device_name: str) -> str | None:
    """Catalog id for a CUDA/NVML device name (the catalog's one matcher, shared with `monitor`)."""
    from gpuwise.catalog.device_names import match_device_name

    return match_device_name(device_name) if device_name else None


def build_evidence(raw: dict[str, Any], steps: list[dict[str, Any]], rank: int | None) -> Evidence:
    """The rules' ``Evidence`` for one raw record and its measured steps (``rank``: the process's rank, None
    when not distributed), with notes on what the memory and CPU figures are.
    """
    meta = raw.get("meta") or {}
    ev = Evidence(
        source="profile",
        label=raw.get("label") or meta.get("script", ""),
        rank=rank,
        device=raw.get("device", ""),
    )
    telemetry = raw.get("telemetry") or {}
    memory = raw.get("memory") or {}
    if steps:
        _from_steps(ev, steps)
        fill_comm_evidence(ev, steps)
    _from_loader_and_cpu(ev, raw, telemetry)
    if ev.device == "cuda" and steps:
        _from_cuda_counters(ev, steps, raw.get("model") or {}, memory)
        _from_cuda_events(ev, steps)
    if telemetry.get("gpu"):
        _from_nvml(ev, telemetry["gpu"])
    _from_catalog(ev, raw.get("gpu_name") or "")
    ev.context.workload_kind = kind_from_phases(ev.steps.phase_s)
    ev.context.host_frames = _host_frames(raw.get("host_frames") or {})
    ev.context.framework = meta.get("framework")
    ev.memory.kept_objects = list(memory.get("kept") or [])
    if memory.get("measure"):
        ev.memory.memory_measure = memory["measure"]
        ev.notes.append(f"memory_per_step_bytes: {memory['measure']}")
    if ev.context.cpu_util_pct is not None:
        ev.notes.append(
            "cpu_util_pct: this process and its children (DataLoader workers), share of the usable cores"
        )
    return ev


def _from_steps(ev: Evidence, steps: list[dict[str, Any]]) -> None:
    times = [s["wall_s"] for s in steps]
    ev.steps.num_steps = len(steps)
    ev.steps.step_time_s = sum(times) / len(times)
    ev.steps.step_times_s = times
    ev.steps.phase_s = {k: v.s_per_step for k, v in phase_breakdown(steps).items()}
    ev.loader.input_wait_pct = ev.steps.phase_pct("data_wait")
    if len(times) >= MIN_STEPS_FOR_STATISTICS:
        # phases of the typical steps: one long stall must not dilute every share (step_outliers names it)
        limit = outlier_limit_s(times)
        typical = [s for s in steps if s["wall_s"] <= limit]
        ev.steps.phase_s_typical = {k: v.s_per_step for k, v in phase_breakdown(typical).items()}
    readings = [(i, s["memory_bytes"]) for i, s in enumerate(steps) if s.get("memory_bytes") is not None]
    ev.memory.memory_per_step_bytes = [m for _, m in readings]
    rss = [steps[i].get("rss_bytes") for i, _ in readings]
    if rss and None not in rss:  # the process RSS read with each reading (CPU heap runs)
        ev.memory.memory_rss_per_step_bytes = [float(r) for r in rss if r is not None]
    if len(readings) < len(steps):  # the probe spaced its reads to stay within its time budget
        ev.memory.memory_step_index = [i for i, _ in readings]


def _from_loader_and_cpu(ev: Evidence, raw: dict[str, Any], telemetry: dict[str, Any]) -> None:
    loader = raw.get("loader") or {}
    if loader:
        ev.loader.loader_num_workers = loader.get("num_workers")
        ev.loader.loader_pin_memory = loader.get("pin_memory")
        # the loading side's CPU demand (on a CPU or waiting for a core): the training thread with
        # num_workers=0, the workers otherwise; the bare CPU share only where schedstat is missing
        busy = loader.get("loader_busy_pct")
        if busy is None and loader.get("num_workers") == 0:
            busy = loader.get("main_thread_cpu_share_pct")
        ev.loader.loader_wait_cpu_pct = busy
        ev.loader.loader_runq_pct = loader.get("loader_runq_pct")
        ev.loader.loader_batch_tensors = loader.get("batch_tensors")
        ev.loader.loader_batch_bytes = loader.get("batch_bytes")
    ev.context.cpu_count = raw.get("cpu_count") or telemetry.get("cpu_count")
    ev.context.cpu_util_pct = telemetry.get("process_cpu_pct")
    system, own = telemetry.get("system_cpu_pct"), telemetry.get("process_cpu_pct")
    if system is not None and own is not None:
        # both are shares of the whole machine: what is left of the busy share is other processes'
        ev.context.other_cpu_pct = max(0.0, system - own)
    ev.context.cpu_steal_pct = telemetry.get("cpu_steal_pct")


def _host_frames(section: dict[str, Any]) -> list[dict[str, Any]]:
    """The sampler's top frames with each one's share of its gap's samples; ``calls_forward`` when the
    frame's function is the one that calls the model (its host time is the step's own code)."""
    totals = section.get("samples") or {}
    callers = set(section.get("forward_callers") or [])

    def function_key(frame: str) -> str:
        where, _, function = (frame or "").partition(" ")
        return f"{where.split(':')[0]} {function}"

    return [
        {
            "phase": row["phase"],
            "frame": row["frame"],
            "leaf": row["leaf"],
            "pct": round(100.0 * row["samples"] / totals[row["phase"]], 1),
            "samples": row["samples"],
            "calls_forward": bool(row["frame"]) and function_key(row["frame"]) in callers,
        }
        for row in section.get("top") or []
        if totals.get(row["phase"])
    ]


def _from_cuda_counters(
    ev: Evidence, steps: list[dict[str, Any]], model: dict[str, Any], memory: dict[str, Any]
) -> None:
    """Host syncs, host->device copies, precision and the allocator's peak: what the CUDA hooks count."""
    total = sum(s["wall_s"] for s in steps)
    ev.activity.sync_calls_per_step = sum(s.get("sync_calls", 0) for s in steps) / len(steps)
    ev.activity.sync_wait_pct = (
        100.0 * sum(s.get("sync_wait_s", 0.0) for s in steps) / total if total else None
    )
    h2d = sum(s.get("h2d_bytes", 0) for s in steps)
    if h2d:
        ev.activity.h2d_copy_pct = ev.steps.phase_pct("h2d_copy")
        ev.activity.pageable_copy_pct = 100.0 * sum(s.get("h2d_pageable_bytes", 0) for s in steps) / h2d
    ev.precision.amp_enabled = model.get("amp_enabled")
    if model.get("param_dtype") == "float32" and model.get("amp_enabled") is False:
        ev.precision.fp32_matmul_pct = (
            100.0  # every matmul of an fp32 model without autocast runs in fp32 (or TF32)
        )
    elif model.get("amp_enabled") or model.get("param_dtype") in {"bfloat16", "float16"}:
        ev.precision.fp32_matmul_pct = 0.0
    ev.memory.memory_capacity_bytes = memory.get("capacity_bytes")
    ev.memory.memory_peak_bytes = memory.get("peak_reserved_bytes")


def _from_cuda_events(ev: Evidence, steps: list[dict[str, Any]]) -> None:
    gpu_phases = gpu_phase_breakdown(steps)
    if gpu_phases and ev.steps.step_time_s:
        # Event spans include gaps inside a phase: this busy share is an upper bound, idle a lower bound.
        busy = sum(gpu_phases.values())
        ev.activity.gpu_idle_pct = max(0.0, 100.0 * (1.0 - busy / ev.steps.step_time_s))
        ev.notes.append("gpu_idle_pct: from CUDA-event spans of the phases (a lower bound on idle time)")


def _from_nvml(ev: Evidence, gpu: dict[str, Any]) -> None:
    ev.activity.gpu_util_pct = gpu.get("util_pct")
    ev.telemetry.temperature_c_max = gpu.get("temperature_c_max")
    ev.telemetry.power_w_mean = gpu.get("power_w_mean")
    ev.telemetry.sm_clock_mhz_mean = gpu.get("sm_clock_mhz_mean")
    ev.telemetry.throttle_pct = {
        k: v for k, v in (gpu.get("clock_reason_pct") or {}).items() if k != "gpu_idle"
    }
    if ev.memory.memory_capacity_bytes is None and gpu.get("memory_total_bytes"):
        ev.memory.memory_capacity_bytes = int(gpu["memory_total_bytes"])
        peak = gpu.get("memory_used_peak_bytes")
        ev.memory.memory_peak_bytes = int(peak) if peak is not None else None
        ev.notes.append("memory peak from NVML (includes the CUDA context and other processes)")


def _from_catalog(ev: Evidence, gpu_name: str) -> None:
    catalog_id = match_catalog_gpu(gpu_name) if gpu_name else None
    ev.gpu = catalog_id or gpu_name
    if catalog_id:
        from gpuwise.catalog import get_gpu

        spec = get_gpu(catalog_id)
        if spec.bf16_tflops and spec.fp32_tflops:
            ev.precision.tensor_core_speedup = spec.bf16_tflops / spec.fp32_tflops


__all__ = ["build_evidence", "match_catalog_gpu"]
