"""Result objects of the performance model. Every renderer and the JSON come from these."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from gpuwise.workload.spec import Precision

__all__ = ["BOUNDS", "Bound", "InferencePerf", "Mode", "PerfPrediction", "TrainingPerf"]


# What limits the step: the resource whose time dominates.
Bound = Literal["compute", "memory_bandwidth", "communication", "host"]
BOUNDS: tuple[Bound, ...] = get_args(Bound)
# What a prediction is of: an optimizer step, or serving / offline generation.
Mode = Literal["training", "inference"]


@dataclass(frozen=True)
class TrainingPerf:
    """One optimizer step of a training or fine-tuning job (times are per GPU, per step)."""

    global_tokens_per_step: int  # tokens (or images) the whole job consumes per optimizer step
    micro_batch_tokens: int  # one micro-batch of one data-parallel replica (batch × seq)
    grad_accum: int
    data_parallel: int
    tp: int
    pp: int
    model_flops_per_token: float  # what MFU counts (no recompute), whole model
    executed_flops_per_step_per_gpu: float  # incl. recompute
    compute_s: float  # matmul + attention kernels over all micro-batches
    linear_s: float
    attention_s: float
    memory_s: float  # memory-bound passes: optimizer, dequantization, LoRA adapters, elementwise ops
    optimizer_s: float
    dequant_s: float  # quantized base weights -> 16-bit before each matmul (QLoRA)
    adapter_s: float  # LoRA's unfused cast/dropout/scale/add kernels
    elementwise_s: float  # norms, residual adds, activations, rotary, casts, loss, fp8 casts (memory-bound)
    weight_traffic_s: (
        float  # autocast weight casts, gradient accumulation, DDP bucket / FSDP2 buffer copies (memory-bound)
    )
    tp_comm_s: float  # tensor-parallel all-reduces (not overlapped)
    dp_comm_s: float  # data-parallel / sharding traffic before overlap
    dp_exposed_s: float  # what of it stays visible
    bubble_s: float
    bubble_fraction: float
    host_floor_s: float  # launch/dispatch time of one micro-batch's kernels
    step_time_s: float
    linear_efficiency: float  # fraction of the compute dtype's peak assumed for matmuls
    attention_efficiency: float
    attention_bound: Bound = "compute"  # compute (FLOPs) or memory_bandwidth (q/k/v/o or score traffic)
    links: dict[str, Any] = field(default_factory=dict)  # collective -> link used
    optimizer: Any = None  # gpuwise.perf.optimizer_step.OptimizerStep: implementation, bytes, launches
    offload_s: float = 0.0  # ZeRO-Offload / FSDP cpu_offload: PCIe copies + the host optimizer step (exposed)

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the training breakdown."""
        return asdict(self)


@dataclass(frozen=True)
class InferencePerf:
    """Serving or offline generation (times per replica; throughputs for the whole job)."""

    prompt_tokens: int
    output_tokens: int
    replicas: int  # data-parallel copies of the model (num_gpus / (tp × pp))
    tp: int
    pp: int
    weights_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    kv_budget_bytes_per_gpu: float
    max_concurrency: int  # sequences of prompt + output tokens whose KV cache fits, per replica
    requested_batch: int
    batch: int  # decode batch per replica actually used (requested, capped by KV memory)
    ttft_s: float  # prefill of `batch_size` prompts, first token included
    prefill_tokens_per_s: float
    tpot_s: float  # time per output token at `batch` (decode step without prefill interleaved)
    decode_bound: Bound  # what limits a decode-only step at `batch`
    throughput_bound: Bound  # what limits steady-state throughput (prefill work included)
    decode_compute_bound_batch: float  # batch at which decode turns compute-bound
    decode_weight_bytes: float  # weights read per decode step per GPU
    decode_kv_bytes: float  # KV read per decode step per GPU
    tp_comm_per_step_s: float
    step_overhead_s: float
    output_tokens_per_s: float  # whole job, steady state (prefill work included)
    output_tokens_per_s_per_gpu: float
    total_tokens_per_s: float  # prompt + output tokens processed per second
    requests_per_s: float
    request_latency_s: float  # ttft + output × tpot for one request
    batching: Literal["continuous", "static"]  # serving engines | one batch at a time

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the inference breakdown."""
        return asdict(self)


@dataclass(frozen=True)
class PerfPrediction:
    """Predicted speed of one workload on one GPU type, with what bounds it and why."""

    workload: dict[str, Any]
    gpu: str
    gpu_name: str
    num_gpus: int
    mode: Mode
    precision: Precision
    compute_dtype: str
    bound: Bound
    step_time_s: (
        float  # training: optimizer step; inference: time per output token (or per batch for encoders)
    )
    # training tokens/s or output tokens/s, whole job; images/s for vision tasks (see throughput_unit)
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    samples_per_s: float  # sequences (training), requests (serving) or images per second
    mfu_pct: float  # model FLOPs / (time × GPUs × dense BF16 peak): the PaLM convention, any compute dtype
    model_tflops_per_gpu: float
    # inference: one sequence's KV cache fits next to the weights; training: gpuwise.memory's estimate fits
    fits: bool
    training: TrainingPerf | None = None
    inference: InferencePerf | None = None
    throughput_unit: str = "tokens/s"  # what tokens_per_s counts: tokens/s | output tokens/s | images/s
    efficiency: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    mfu_reference_dtype: str = "bf16"  # the peak mfu_pct divides by: bf16, else fp16/fp32 on GPUs without it
    mfu_compute_dtype_pct: float | None = (
        None  # against the compute dtype's own peak (fp8/fp4/int8/fp32/tf32)
    )

    @property
    def is_training(self) -> bool:
        """Whether this predicts a training step (else inference or serving)."""
        return self.mode == "training"

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuwise perf --json`` document body, with the training or inference breakdown."""
        data = asdict(self)
        data["training"] = self.training.to_dict() if self.training else None
        data["inference"] = self.inference.to_dict() if self.inference else None
        return data
