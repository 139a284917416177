"""What one profiled run measured, as typed values (``RunSummary``) with the JSON form they had as dicts.

``to_dict`` writes exactly the keys and order the run store and ``--json`` have always carried
(docs/json-schema.md), so saved runs and scripts reading the JSON are unaffected; ``from_dict``
reads that form back, tolerating keys an older record lacks. Keys that a run only sometimes
measures (CUDA memory, the model's precision) are left out of the JSON when not measured, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def _present(obj: Any) -> dict[str, Any]:
    """The dataclass as a dict without its unmeasured (None) fields."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if getattr(obj, f.name) is not None}


def _known(cls: Any, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class PhaseShare:
    """Mean seconds per step a phase took, and its share of the step."""

    s_per_step: float
    pct: float

    def to_dict(self) -> dict[str, float]:
        """``{"s_per_step", "pct"}``."""
        return {"s_per_step": self.s_per_step, "pct": self.pct}


@dataclass(frozen=True)
class LoaderInfo:
    """The DataLoader settings seen (the loader that served the most batches)."""

    dataset: str | None = None
    num_workers: int | None = None
    pin_memory: bool | None = None
    prefetch_factor: int | None = None
    persistent_workers: bool | None = None
    batch_size: int | None = None
    batches: int = 0
    main_thread_cpu_share_pct: float | None = None  # only when batch waits were sampled
    # the loading side (training thread at num_workers=0, else the workers) on a CPU, % of the time it
    # was not waiting for a core: CPU-bound loading stays high on a busy machine, I/O does not
    loader_busy_pct: float | None = None
    loader_runq_pct: float | None = None  # of which waiting for a core
    cpu_pressure_pct: float | None = None  # /proc/pressure/cpu "some avg10" at the end of the window

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON; the measured shares only when they were measured."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("main_thread_cpu_share_pct", "loader_busy_pct", "loader_runq_pct", "cpu_pressure_pct"):
            if out[name] is None:
                del out[name]
        return out


@dataclass(frozen=True)
class ModelInfo:
    """Device-side facts about the root module; each is absent until a module with parameters ran."""

    param_dtype: str | None = None
    root_module: str | None = None
    num_params: int | None = None
    amp_enabled: bool | None = None
    tf32_matmul: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The measured facts as JSON (unmeasured ones left out)."""
        return _present(self)


@dataclass(frozen=True)
class MemoryInfo:
    """Live memory: the measure used, CUDA allocator peaks, and the first and last measured readings."""

    measure: str | None = None
    peak_reserved_bytes: int | None = None
    peak_allocated_bytes: int | None = None
    capacity_bytes: int | None = None
    first_step_bytes: float | None = None
    last_step_bytes: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The measured figures as JSON (unmeasured ones left out)."""
        return _present(self)


@dataclass(frozen=True)
class GpuTelemetry:
    """NVML's figures over the measured steps: utilization and memory-busy %, memory used (peak) and total in
    bytes, mean power (W), max temperature (°C), mean SM clock (MHz), % of samples per clock-event reason.
    """

    util_pct: float | None = None
    mem_util_pct: float | None = None
    memory_used_peak_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_w_mean: float | None = None
    temperature_c_max: float | None = None
    sm_clock_mhz_mean: float | None = None
    clock_reason_pct: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON, None ones included."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Telemetry:
    """Sampled CPU, memory, disk and GPU figures (``telemetry.summarize``)."""

    samples: int = 0
    interval_s: float = 0.0
    cpu_count: int | None = None
    process_cpu_pct: float | None = None  # this process and its children, share of the usable cores
    system_cpu_pct: float | None = None  # the whole machine, mean over cores
    cpu_steal_pct: float | None = None  # hypervisor steal, share of CPU time (None: no steal field)
    cpu_per_core_pct: list[float] = field(default_factory=list)
    rss_peak_bytes: float | None = None
    disk_read_bytes_per_s: float | None = None
    gpu: GpuTelemetry | None = None
    not_available: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The telemetry as JSON, with the GPU part nested (None: no GPU sampled)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["gpu"] = self.gpu.to_dict() if self.gpu is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Telemetry:
        """Telemetry back from its JSON form; unknown keys are ignored."""
        values = _known(cls, data)
        if data.get("gpu"):
            values["gpu"] = GpuTelemetry(**_known(GpuTelemetry, data["gpu"]))
        return cls(**values)


@dataclass(frozen=True)
class HookError:
    """An error gpuwise contained inside the user's process (reported once per kind, with a count)."""

    where: str
    error: str
    count: int
    traceback: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The error as JSON."""
        return {"where": self.where, "error": self.error, "count": self.count, "traceback": self.traceback}


@dataclass(frozen=True)
class RunSummary:
    """One profiled process (one rank): identity, step statistics, phases and what was sampled."""

    label: str = ""
    command: str | None = None
    status: str | None = None
    error: str | None = None
    exit_code: int | None = None
    rank: int | None = None
    world_size: int | None = None
    group_id: str | None = None
    started_at_unix_s: float | None = None
    device: str | None = None
    gpu_name: str | None = None
    warmup_steps: int = 0
    total_steps: int = 0
    measured_steps: int = 0
    step_time_s: float | None = None
    step_time_p50_s: float | None = None
    step_time_max_s: float | None = None
    steps_per_s: float | None = None
    wall_s: float | None = None
    phases: dict[str, PhaseShare] = field(default_factory=dict)
    gpu_phases_s: dict[str, float] | None = None
    loader: LoaderInfo | None = None
    model: ModelInfo = field(default_factory=ModelInfo)
    memory: MemoryInfo = field(default_factory=MemoryInfo)
    telemetry: Telemetry | None = None
    step_times_s: list[float] = field(default_factory=list)
    # what closed each step: "optimizer", "backward", "manual", or None when no step was seen
    step_boundary: str | None = None
    hook_errors: list[HookError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON: the keys and order the run store and
        ``--json`` carry (docs/json-schema.md).
        """
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["phases"] = {name: share.to_dict() for name, share in self.phases.items()}
        out["loader"] = self.loader.to_dict() if self.loader is not None else None
        out["model"] = self.model.to_dict()
        out["memory"] = self.memory.to_dict()
        out["telemetry"] = self.telemetry.to_dict() if self.telemetry is not None else None
        out["hook_errors"] = [e.to_dict() for e in self.hook_errors]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        """A summary back from its JSON form, tolerating the keys an older record lacks or names differently
        (``started_at``).
        """
        values = _known(cls, data)
        if "started_at" in data:  # a run saved before JSON schema 2 named the unit
            values.setdefault("started_at_unix_s", data["started_at"])
        values["phases"] = {
            k: PhaseShare(**_known(PhaseShare, v)) for k, v in (data.get("phases") or {}).items()
        }
        values["loader"] = LoaderInfo(**_known(LoaderInfo, data["loader"])) if data.get("loader") else None
        values["model"] = ModelInfo(**_known(ModelInfo, data.get("model") or {}))
        values["memory"] = MemoryInfo(**_known(MemoryInfo, data.get("memory") or {}))
        values["telemetry"] = Telemetry.from_dict(data["telemetry"]) if data.get("telemetry") else None
        values["hook_errors"] = [HookError(**_known(HookError, e)) for e in data.get("hook_errors") or []]
        values["label"] = data.get("label") or ""
        for name in ("warmup_steps", "total_steps", "measured_steps"):
            values[name] = data.get(name) or 0
        return cls(**values)


__all__ = [
    "GpuTelemetry",
    "HookError",
    "LoaderInfo",
    "MemoryInfo",
    "ModelInfo",
    "PhaseShare",
    "RunSummary",
    "Telemetry",
]
