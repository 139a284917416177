"""Result of a traced simulation: what the analytic estimate reports, plus what only a trace can see.

``to_dict()`` carries every key of ``gpuwise.memory.MemoryEstimate.to_dict()`` with the same
meaning (``breakdown`` sums to ``device_total_bytes``; each phase has ``allocated_bytes`` and
``components``), so one consumer reads both; the traced extras follow.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpuwise.perf.prediction import Bound, Mode

__all__ = ["GpuStepTime", "TracedMemoryEstimate", "TracedPhase"]


@dataclass(frozen=True)
class TracedPhase:
    """One phase of the simulated step (forward, backward, optimizer_step, prefill, decode)."""

    name: str
    peak_allocated_bytes: int  # max torch.cuda.memory_allocated() during the phase
    start_bytes: int
    end_bytes: int
    by_category: dict[str, int]  # bytes at the phase peak, by tensor category
    flops: int
    kernels: int  # ops that launch a GPU kernel (eager PyTorch)
    where_at_peak: str  # module running when the peak was reached

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the analytic Phase's ``allocated_bytes`` and ``components_bytes`` keys."""
        data = asdict(self)
        data["allocated_bytes"] = self.peak_allocated_bytes  # the analytic Phase's keys
        data["components_bytes"] = {k: v for k, v in self.by_category.items() if v}
        return data


@dataclass(frozen=True)
class GpuStepTime:
    """Predicted time of the simulated work on one catalog GPU (the perf roofline, op by op)."""

    gpu: str
    # training: one optimizer step (grad_accum micro-batches); inference: prefill + all decode steps
    step_time_s: float
    phase_times_s: dict[str, float]  # one pass of each phase
    bound: Bound  # compute | memory_bandwidth | host
    fits: bool  # the simulated device total fits this GPU's memory

    def to_dict(self) -> dict[str, Any]:
        """JSON form of one GPU's predicted step time."""
        return asdict(self)


@dataclass(frozen=True)
class TracedMemoryEstimate:
    """Exact tensor memory of one step from running the model on fake tensors, plus fixed overheads."""

    workload: dict[str, Any]
    gpu: str
    model: str  # what was simulated
    mode: Mode
    phases: list[TracedPhase]
    peak_phase: str
    peak_allocated_bytes: int
    breakdown: dict[str, int]  # tensor bytes by category at the overall peak (sums to peak_allocated_bytes)
    cuda_context_bytes: int  # CUDA context (+ NCCL buffers), from the analytic estimator's overhead model
    allocator_reserve_bytes: (
        int  # caching-allocator reserve, same model, from the traced transient working set
    )
    paged_state_bytes: int  # paged optimizer state in CUDA unified memory (outside allocated/reserved)
    peak_reserved_bytes: int  # allocated + allocator reserve
    device_total_bytes: int  # reserved + context + paged state (what nvidia-smi would show)
    device_memory_bytes: int  # the GPU's capacity (binary GiB, as the analytic estimate counts it)
    fits: bool
    num_params: int
    trainable_params: int
    flops_per_step: int  # executed FLOPs: attention included, causal masking accounted, recompute included
    flops_by_phase: dict[str, int]  # one pass of each phase
    step_time_s: float | None  # predicted on `gpu`
    step_times: list[GpuStepTime]  # every catalog GPU, fastest first
    top_activation_modules: list[
        dict[str, Any]
    ]  # bytes kept by module (saved for backward, or live at the prefill peak)
    optimizer: str  # what the simulated optimizer was, in words
    notes: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    simulation_wall_s: float = 0.0
    method: str = "traced"

    @property
    def headroom_pct(self) -> float:
        """Device memory left after the device total, in % of the GPU's memory (0 without a capacity)."""
        return (
            100.0 * (1.0 - self.device_total_bytes / self.device_memory_bytes)
            if self.device_memory_bytes
            else 0.0
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuwise memory --traced --json`` document body (bytes as integers; the analytic document's
        keys)."""
        breakdown = {k: v for k, v in self.breakdown.items()}
        breakdown["cuda_context"] = self.cuda_context_bytes
        breakdown["allocator_reserve"] = self.allocator_reserve_bytes
        if self.paged_state_bytes:
            breakdown["paged_optimizer_state"] = self.paged_state_bytes
        return {
            "workload": self.workload,
            "gpu": self.gpu,
            "peak_phase": self.peak_phase,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "device_total_bytes": self.device_total_bytes,
            "gpu_memory_bytes": self.device_memory_bytes,
            "headroom_pct": round(self.headroom_pct, 2),
            "fits": self.fits,
            "breakdown_bytes": breakdown,
            "phases": [p.to_dict() for p in self.phases],
            "notes": list(self.notes),
            "assumptions": list(self.assumptions),
            # traced extras
            "method": self.method,
            "model": self.model,
            "mode": self.mode,
            "cuda_context_bytes": self.cuda_context_bytes,
            "allocator_reserve_bytes": self.allocator_reserve_bytes,
            "paged_state_bytes": self.paged_state_bytes,
            "num_params": self.num_params,
            "trainable_params": self.trainable_params,
            "optimizer": self.optimizer,
            "flops_per_step": self.flops_per_step,
            "flops_by_phase": dict(self.flops_by_phase),
            "step_time_s": self.step_time_s,
            "step_times": [t.to_dict() for t in self.step_times],
            "top_activation_modules": [dict(m) for m in self.top_activation_modules],
            "simulation_wall_s": self.simulation_wall_s,
        }
