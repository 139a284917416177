"""Raw record -> ``ProfileRun``: step statistics, the phase breakdown, Evidence and ranked findings.

Pure and torch-free: the CLI builds runs from the records its child processes wrote, the Python
API from its own recorder, and the run store re-renders saved runs, all through ``build_run``.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from gpuwise.diagnose import Evidence, Finding, diagnose
from gpuwise.profile.phases import PHASES
from gpuwise.profile.types import PhaseShare, RunSummary


@dataclass
class ProfileRun:
    """One profiled process (one rank); ``run_id`` is set once the run store has saved it."""

    summary: RunSummary
    evidence: Evidence
    findings: list[Finding] = field(default_factory=list)
    run_id: int | None = None

    @property
    def steps_per_s(self) -> float | None:
        return self.summary.steps_per_s

    @property
    def phases(self) -> dict[str, PhaseShare]:
        return self.summary.phases

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (docs/json-schema.md): the summary's keys between run_id and the findings."""
        return {
            "run_id": self.run_id,
            **self.summary.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "evidence": self.evidence.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileRun:
        evidence = (
            Evidence.from_dict(data["evidence"], "run")
            if data.get("evidence")
            else Evidence(source="profile")
        )
        findings = [Finding.from_dict(f) for f in data.get("findings", [])]
        return cls(RunSummary.from_dict(data), evidence, findings, data.get("run_id"))


def measured_steps(raw: dict[str, Any]) -> tuple[list[dict[str, Any]], int, list[str]]:
    """The steps after warm-up, how many warm-up steps were dropped, and notes on what was done."""
    steps = raw.get("steps") or []
    warmup = int(raw.get("warmup") or 0)
    notes = []
    if len(steps) > warmup:
        measured, dropped = steps[warmup:], warmup
    elif steps:
        dropped = min(1, len(steps) - 1)
        measured = steps[dropped:]
        notes.append(
            f"only {len(steps)} steps ran (fewer than the {warmup} warm-up steps): warm-up steps are included"
        )
    else:
        measured, dropped = [], 0
    requested = raw.get("steps_requested")
    if requested:
        measured = measured[:requested]
        if steps and len(measured) < requested:
            notes.append(
                f"the run ended after {len(measured)} measured steps, fewer than the {requested} requested"
            )
    return measured, dropped, notes


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def phase_breakdown(steps: list[dict[str, Any]]) -> dict[str, PhaseShare]:
    """Mean seconds per step and share of the step for each phase."""
    if not steps:
        return {}
    total = sum(s["wall_s"] for s in steps)
    out = {}
    for phase in PHASES:
        seconds = sum(s["phase_s"].get(phase, 0.0) for s in steps)
        out[phase] = PhaseShare(seconds / len(steps), 100.0 * seconds / total if total > 0 else 0.0)
    return out


def gpu_phase_breakdown(steps: list[dict[str, Any]]) -> dict[str, float] | None:
    with_gpu = [s["gpu_phase_s"] for s in steps if s.get("gpu_phase_s")]
    if not with_gpu:
        return None
    names = sorted({k for g in with_gpu for k in g})
    return {k: sum(g.get(k, 0.0) for g in with_gpu) / len(with_gpu) for k in names}


def match_catalog_gpu(device_name: str) -> str | None:
    """Catalog id for a CUDA/NVML device name ('NVIDIA A100-SXM4-80GB' -> 'a100-80gb-sxm'), if any."""
    if not device_name:
        return None
    from gpuwise.catalog import list_gpus

    compact = re.sub(r"[^a-z0-9]", "", device_name.lower())
    best, best_score = None, 0
    for gpu in list_gpus():
        tokens = [t for t in gpu.id.split("-") if t]
        if not tokens or tokens[0] not in compact:
            continue
        score = sum(1 for t in tokens if t in compact)
        if score > best_score:
            best, best_score = gpu.id, score
    return best


def build_evidence(raw: dict[str, Any], steps: list[dict[str, Any]], rank: int | None) -> Evidence:
    meta = raw.get("meta") or {}
    ev = Evidence(
        source="profile",
        label=raw.get("label") or meta.get("script", ""),
        rank=rank,
        device=raw.get("device", ""),
    )
    telemetry = raw.get("telemetry") or {}
    loader = raw.get("loader") or {}
    model = raw.get("model") or {}
    memory = raw.get("memory") or {}
    if steps:
        times = [s["wall_s"] for s in steps]
        ev.num_steps = len(steps)
        ev.step_time_s = sum(times) / len(times)
        ev.step_times_s = times
        ev.phase_s = {k: v.s_per_step for k, v in phase_breakdown(steps).items()}
        ev.input_wait_pct = ev.phase_pct("data_wait")
        readings = [(i, s["memory_bytes"]) for i, s in enumerate(steps) if s.get("memory_bytes") is not None]
        ev.memory_per_step_bytes = [m for _, m in readings]
        if len(readings) < len(steps):  # the probe spaced its reads to stay within its time budget
            ev.memory_step_index = [i for i, _ in readings]
    if loader:
        ev.loader_num_workers = loader.get("num_workers")
        ev.loader_pin_memory = loader.get("pin_memory")
    ev.cpu_count = raw.get("cpu_count") or telemetry.get("cpu_count")
    ev.cpu_util_pct = telemetry.get("process_cpu_pct")
    if ev.device == "cuda" and steps:
        total = sum(s["wall_s"] for s in steps)
        ev.sync_calls_per_step = sum(s.get("sync_calls", 0) for s in steps) / len(steps)
        ev.sync_wait_pct = 100.0 * sum(s.get("sync_wait_s", 0.0) for s in steps) / total if total else None
        h2d = sum(s.get("h2d_bytes", 0) for s in steps)
        if h2d:
            ev.h2d_copy_pct = ev.phase_pct("h2d_copy")
            ev.pageable_copy_pct = 100.0 * sum(s.get("h2d_pageable_bytes", 0) for s in steps) / h2d
        ev.amp_enabled = model.get("amp_enabled")
        if model.get("param_dtype") == "float32" and model.get("amp_enabled") is False:
            ev.fp32_matmul_pct = (
                100.0  # every matmul of an fp32 model without autocast runs in fp32 (or TF32)
            )
        elif model.get("amp_enabled") or model.get("param_dtype") in {"bfloat16", "float16"}:
            ev.fp32_matmul_pct = 0.0
        ev.memory_capacity_bytes = memory.get("capacity_bytes")
        ev.memory_peak_bytes = memory.get("peak_reserved_bytes")
    gpu_phases = gpu_phase_breakdown(steps) if ev.device == "cuda" else None
    if gpu_phases and ev.step_time_s:
        # Event spans include gaps inside a phase, so this busy share is an upper bound: idle is a lower bound.
        busy = sum(gpu_phases.values())
        ev.gpu_idle_pct = max(0.0, 100.0 * (1.0 - busy / ev.step_time_s))
        ev.notes.append("gpu_idle_pct: from CUDA-event spans of the phases (a lower bound on idle time)")
    gpu = telemetry.get("gpu") or {}
    if gpu:
        ev.gpu_util_pct = gpu.get("util_pct")
        ev.temperature_c_max = gpu.get("temperature_c_max")
        ev.power_w_mean = gpu.get("power_w_mean")
        ev.sm_clock_mhz_mean = gpu.get("sm_clock_mhz_mean")
        ev.throttle_pct = {k: v for k, v in (gpu.get("clock_reason_pct") or {}).items() if k != "gpu_idle"}
        if ev.memory_capacity_bytes is None and gpu.get("memory_total_bytes"):
            ev.memory_capacity_bytes = int(gpu["memory_total_bytes"])
            ev.memory_peak_bytes = (
                int(gpu["memory_used_peak_bytes"]) if gpu.get("memory_used_peak_bytes") is not None else None
            )
            ev.notes.append("memory peak from NVML (includes the CUDA context and other processes)")
    gpu_name = raw.get("gpu_name") or ""
    catalog_id = match_catalog_gpu(gpu_name) if gpu_name else None
    ev.gpu = catalog_id or gpu_name
    if catalog_id:
        from gpuwise.catalog import get_gpu

        spec = get_gpu(catalog_id)
        if spec.bf16_tflops and spec.fp32_tflops:
            ev.tensor_core_speedup = spec.bf16_tflops / spec.fp32_tflops
    if memory.get("measure"):
        ev.notes.append(f"memory_per_step_bytes: {memory['measure']}")
    if ev.cpu_util_pct is not None:
        ev.notes.append(
            "cpu_util_pct: this process and its children (DataLoader workers), share of the usable cores"
        )
    return ev


def build_run(raw: dict[str, Any], command: str | None = None, exit_code: int | None = None) -> ProfileRun:
    """Summarize one raw record; ``command`` and ``exit_code`` come from the launcher, when there is one."""
    meta = raw.get("meta") or {}
    rank = meta.get("rank")
    steps, dropped, notes = measured_steps(raw)
    times = [s["wall_s"] for s in steps]
    total = sum(times)
    evidence = build_evidence(raw, steps, rank)
    memory = dict(raw.get("memory") or {})
    mem = [s.get("memory_bytes") for s in steps if s.get("memory_bytes") is not None]
    if mem:
        memory.setdefault("first_step_bytes", mem[0])
        memory.setdefault("last_step_bytes", mem[-1])
    summary = RunSummary.from_dict(
        {
            "label": raw.get("label") or meta.get("script", ""),
            "command": command if command is not None else meta.get("command"),
            "status": raw.get("status"),
            "error": raw.get("error"),
            "exit_code": exit_code,
            "rank": rank,
            "world_size": meta.get("world_size"),
            "group_id": meta.get("group_id"),
            "started_at": meta.get("started_at"),
            "device": raw.get("device"),
            "gpu_name": raw.get("gpu_name") or None,
            "warmup_steps": dropped,
            "total_steps": len(raw.get("steps") or []),
            "measured_steps": len(steps),
            "step_time_s": total / len(times) if times else None,
            "step_time_p50_s": statistics.median(times) if times else None,
            "step_time_max_s": max(times) if times else None,
            "steps_per_s": len(times) / total if total > 0 else None,
            "wall_s": raw.get("wall_s"),
            "gpu_phases_s": gpu_phase_breakdown(steps),
            "loader": raw.get("loader"),
            "model": raw.get("model") or {},
            "memory": memory,
            "telemetry": raw.get("telemetry"),
            "step_times_s": times,
            "hook_errors": raw.get("hook_errors") or [],
            "notes": list(raw.get("notes") or []) + notes,
        }
    )
    summary = replace(summary, phases=phase_breakdown(steps))
    return ProfileRun(summary, evidence, diagnose(evidence))
