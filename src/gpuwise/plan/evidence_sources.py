"""Turn predictions into Evidence (source "prediction") and merge measured evidence files.

The rules in `gpuwise.diagnose` decide what is a problem; this module only fills fields.
Measured evidence (profile, trace, telemetry) keeps its own source and confidence; the
prediction fills what measurement did not see.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from gpuwise.catalog import GPU, get_gpu, get_model
from gpuwise.diagnose import Evidence, load_evidence
from gpuwise.diagnose.evidence import (
    Communication,
    InputPipeline,
    MemoryUse,
    ModelConfig,
    Precision,
    RunContext,
    WorkloadKind,
)
from gpuwise.plan.evaluate import Prediction
from gpuwise.workload import Workload

__all__ = [
    "cpu_run_note",
    "host_side_of_cpu_run",
    "kv_bits",
    "merge_evidence",
    "prediction_evidence",
    "read_evidence_files",
    "tensor_core_speedup",
    "weight_bits",
    "workload_kind",
]

_BITS = {
    "fp32": 32,
    "amp-bf16": 16,
    "amp-fp16": 16,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
    "nf4": 4,
    "fp4": 4,  # memgaps: NVFP4/MXFP4
}
_KV_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8}


def weight_bits(workload: Workload) -> int:
    """Bits per stored weight (AMP keeps fp32 weights; only the matmuls run in 16-bit)."""
    if workload.precision.startswith("amp-"):
        return 32
    return _BITS[workload.precision]


def kv_bits(workload: Workload) -> int:
    """Bits per KV-cache element: the cache dtype if set, else the engine's 16-bit compute dtype
    (32 for fp32)."""
    if workload.kv_cache_dtype != "auto":
        return _KV_BITS[workload.kv_cache_dtype]
    return 32 if workload.precision == "fp32" else 16  # engines cache K/V in the 16-bit compute dtype


def tensor_core_speedup(gpu: GPU, convolutions: bool = False) -> float | None:
    """16-bit tensor-core peak over the fp32 baseline's peak: what leaving fp32 buys on this GPU at most.

    cuDNN runs fp32 convolutions in TF32 by default where the GPU has it (PyTorch's
    torch.backends.cudnn.allow_tf32 defaults to True; matmuls default to full fp32), so a conv net's
    fp32 baseline is the TF32 peak, not the fp32 one.
    """
    half = gpu.bf16_tflops or gpu.fp16_tflops
    base = gpu.tf32_tflops if convolutions and gpu.tf32_tflops else gpu.fp32_tflops
    if not half or not base:
        return None
    return half / base


def _is_conv_net(workload: Workload) -> bool:
    arch = get_model(workload.model) if workload.model and workload.is_cv else None
    return arch is not None and not arch.is_transformer


def workload_kind(workload: Workload) -> WorkloadKind:
    """What a workload file says it is: its task trains, or serves a demand (a ``serving:`` section, or
    task serving), or runs inference (inference, RAG, cv-inference)."""
    if workload.is_training:
        return "training"
    if workload.serving is not None or workload.task == "serving":
        return "serving"
    return "inference" if workload.is_inference else "unknown"


def prediction_evidence(
    workload: Workload,
    prediction: Prediction,
    fit_options_bytes: dict[str, float] | None = None,
    attention_scores_bytes: int | None = None,
    larger_batch_speedup_x: float | None = None,
) -> Evidence:
    """What the models predict for this workload, in the rule engine's terms."""
    gpu = get_gpu(workload.gpu)
    outcome = prediction.outcome
    ev = Evidence(
        source="prediction",
        label=workload.name or Path(workload.source).stem or workload.model,
        device="cuda",
        gpu=gpu.id,
        memory=MemoryUse(memory_capacity_bytes=outcome.capacity_bytes, memory_peak_bytes=outcome.peak_bytes),
        precision=Precision(
            tensor_core_speedup=tensor_core_speedup(gpu, convolutions=_is_conv_net(workload))
        ),
        comm=Communication(comm_exposed_pct=outcome.comm_exposed_pct if workload.num_gpus > 1 else None),
        context=RunContext(workload_kind=workload_kind(workload)),
        model=ModelConfig(
            weight_bytes=prediction.weight_bytes,
            weight_bits=weight_bits(workload),
            attention_impl=workload.attention,
            attention_scores_bytes=attention_scores_bytes,
            fit_options_bytes=dict(fit_options_bytes or {}),
            larger_batch_speedup_x=larger_batch_speedup_x,
        ),
    )
    if workload.is_training or workload.task == "cv-inference":
        # The matmul precision is a property of the configuration, so the prediction knows it exactly.
        ev.precision.fp32_matmul_pct = 100.0 if workload.precision == "fp32" else 0.0
        ev.precision.amp_enabled = workload.precision.startswith("amp-")
    if workload.is_training:
        ev.steps.step_time_s = outcome.step_time_s
        ev.steps.phase_s = dict(prediction.phase_s)
        ev.model.optimizer_fused = (
            workload.optimizer in {"adamw-fused"} if workload.optimizer.startswith("adamw") else None
        )
    if workload.is_inference and not workload.is_cv:
        ev.model.kv_cache_bytes = prediction.kv_cache_bytes
        ev.model.kv_cache_bits = kv_bits(workload)
        ev.model.decode_bandwidth_bound = (
            prediction.decode_bound == "memory_bandwidth" if prediction.decode_bound else None
        )
    if workload.utilization_pct is not None:
        ev.activity.gpu_util_pct = workload.utilization_pct
        ev.notes.append(
            f"gpu_util_pct {workload.utilization_pct:g} % as observed by the user (workload utilization_pct)"
        )
    return ev


def read_evidence_files(paths: Sequence[str | Path]) -> list[Evidence]:
    """Load every --evidence file (profile, trace, runs JSON; one or many evidence objects each)."""
    return [ev for path in paths for ev in load_evidence(path)]


def host_side_of_cpu_run(ev: Evidence) -> Evidence:
    """A CPU-only run as evidence for a GPU plan: what the host measured (loader, CPU, leaks, framework)
    carries over; its step times and shares describe the CPU computing, never a GPU idling, so they go.
    The input-wait share is kept as the share of the CPU step (a lower bound: a GPU computes faster)."""
    from gpuwise.diagnose.statistics import input_share_pct

    return Evidence(
        source=ev.source,
        label=ev.label,
        rank=ev.rank,
        device=ev.device,
        loader=InputPipeline(
            input_wait_pct=input_share_pct(ev),
            loader_num_workers=ev.loader.loader_num_workers,
            loader_pin_memory=ev.loader.loader_pin_memory,
        ),
        context=RunContext(
            workload_kind=ev.context.workload_kind,
            cpu_count=ev.context.cpu_count,
            cpu_util_pct=ev.context.cpu_util_pct,
            framework=ev.context.framework,
            other_cpu_pct=ev.context.other_cpu_pct,
            cpu_steal_pct=ev.context.cpu_steal_pct,
        ),
        memory=MemoryUse(
            memory_per_step_bytes=list(ev.memory.memory_per_step_bytes),
            memory_step_index=list(ev.memory.memory_step_index),
            memory_measure=ev.memory.memory_measure,
        ),
        notes=[*ev.notes, "host side of a CPU-only run: step times and shares not carried to a GPU plan"],
    )


def cpu_run_note(ev: Evidence, gpu: str) -> str:
    """The plan's note for evidence from a CPU-only run: what of it is used for `gpu` and why."""
    name = f" ({ev.label})" if ev.label else ""
    return (
        f"Evidence{name} comes from a CPU-only run: only its host side is used for {gpu} (input pipeline, "
        "memory growth; findings at medium confidence). Its input-wait share is a lower bound there (the GPU "
        "computes faster); its step times and idle shares describe the CPU, not a GPU, and were not used."
    )


def merge_evidence(predicted: Evidence, measured: Iterable[Evidence]) -> list[Evidence]:
    """Measured evidence first (rules rank high-confidence findings above predicted ones).

    A prediction's utilization guess is dropped when a measurement reports utilization, so
    the user's guess never contradicts a measured number in the same plan.
    """
    measured = list(measured)
    if any(ev.activity.gpu_util_pct is not None or ev.activity.gpu_idle_pct is not None for ev in measured):
        predicted.activity.gpu_util_pct = None
    return [*measured, predicted]
