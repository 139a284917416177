"""Optimizer step time per implementation: bytes moved per parameter element and kernel launches.

An optimizer update does a few FLOPs per byte, so it is memory-bound: its device time is the
bytes its passes read and write over the streaming bandwidth. Implementations differ in how many
passes they make (fused AdamW: one; the default foreach AdamW: eight, with temporaries; 8-bit
AdamW: one, over 1-byte states) and in how they launch them (multi-tensor kernels vs one launch
per op and parameter tensor from a Python loop). When launching takes longer than the kernels
run, the step waits on the host. Byte counts and launch rules, with their sources, are in
efficiency.toml [optimizer].
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from gpuwise.catalog import GPU, ModelArch
from gpuwise.perf import efficiency as eff
from gpuwise.perf.flops import lora_targets
from gpuwise.perf.prediction import Bound
from gpuwise.workload.spec import Optimizer

__all__ = [
    "IMPLEMENTATIONS",
    "Implementation",
    "OptimizerStep",
    "Pass",
    "default_implementation",
    "optimizer_step",
    "trainable_tensors",
]


# Implementation behind each workload optimizer name (PyTorch defaults: foreach on CUDA).
Implementation = Literal["foreach", "for-loop", "fused", "bitsandbytes-8bit", "adafactor"]
IMPLEMENTATIONS: dict[Optimizer, Implementation] = {
    "adamw": "foreach",
    "adamw-fused": "fused",
    "adamw-8bit": "bitsandbytes-8bit",
    "paged-adamw-8bit": "bitsandbytes-8bit",
    "adafactor": "adafactor",
    "sgd": "foreach",
}


def default_implementation(optimizer: Optimizer, framework: str = "") -> Implementation:
    """The implementation a job's optimizer name runs: frameworks that ship a fused AdamW use it."""
    if optimizer == "adamw" and framework.strip().lower() in eff.constants().optimizer.fused_adamw_frameworks:
        return "fused"
    return IMPLEMENTATIONS.get(optimizer, "foreach")


@dataclass(frozen=True)
class Pass:
    """One elementwise pass over every trainable element: how many p/g/s-sized tensors it reads
    and writes (p = parameter, g = gradient, s = one optimizer state), and its tensor lists."""

    p: int
    g: int
    s: int
    lists: int  # tensor lists the multi-tensor kernel walks (its "depth")


# AdamW, foreach or for-loop (torch/optim/adamw.py): weight decay, lerp_ m, mul_ v, addcmul_ v,
# sqrt, div_, add_ eps, addcdiv_ p.
_ADAMW_PASSES: tuple[Pass, ...] = (
    Pass(2, 0, 0, 1),
    Pass(0, 1, 2, 2),
    Pass(0, 0, 2, 1),
    Pass(0, 1, 2, 3),
    Pass(0, 0, 2, 2),
    Pass(0, 0, 2, 1),
    Pass(0, 0, 2, 1),
    Pass(2, 0, 2, 3),
)
# torch._fused_adamw_: read p, g, m, v; write p, m, v; one kernel walking four lists.
_FUSED_ADAMW_PASSES: tuple[Pass, ...] = (Pass(2, 1, 4, 4),)
# SGD with momentum, foreach (torch/optim/sgd.py): mul_ buf, add_ buf += g, add_ p += -lr * buf.
_SGD_PASSES: tuple[Pass, ...] = (Pass(0, 0, 2, 1), Pass(0, 1, 2, 2), Pass(2, 0, 1, 2))
# GradScaler's unscale of fp16 gradients (_amp_foreach_non_finite_check_and_unscale_).
_UNSCALE_PASS = Pass(0, 2, 0, 1)


@dataclass(frozen=True)
class OptimizerStep:
    """Time of one optimizer update on one GPU, and what sets it."""

    optimizer: Optimizer
    implementation: Implementation
    params: float  # trainable elements this GPU updates
    tensors: int  # trainable parameter tensors
    bytes_per_param: float
    bytes_moved: float
    launches: int
    device_s: float  # bytes / streaming bandwidth
    host_s: float  # dispatch and launch time on the CPU
    time_s: float
    bound: Bound  # memory_bandwidth | host

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the optimizer step's implementation, bytes moved and kernel launches."""
        return asdict(self)


def trainable_tensors(
    arch: ModelArch, lora_rank: int | None = None, lora_target_names: tuple[str, ...] = ("all-linear",)
) -> int:
    """Parameter tensors the optimizer walks (launch counts depend on tensors, not elements).

    Full training: per layer the attention and MLP weights (one per expert), their biases when
    the parameter counts show biases, the router, and the norm vectors; then embeddings, final
    norm and an untied head. LoRA: an A and a B matrix per adapted projection (and expert).
    Conv nets: ~3 per layer (convolution weight, norm weight and bias).
    """
    if not arch.is_transformer:
        return 3 * max(arch.num_layers, 1) + 2
    counts = arch.param_counts()
    experts = max(arch.num_experts, 1)
    if lora_rank:
        per_layer = 0
        for key in lora_targets(arch, lora_target_names):
            per_layer += 2 * (experts if key in {"gate", "up", "down"} else 1)
        return per_layer * arch.num_layers
    h, i = arch.hidden_size, arch.intermediate_size
    attn_weights = 2 * h * arch.q_dim + 2 * h * arch.kv_dim
    attention = 4 + (
        4
        if counts.per_layer_attention - attn_weights >= arch.q_dim + h
        else 3
        if counts.per_layer_attention > attn_weights
        else 0
    )
    mlp_matrices = 3 if arch.gated_mlp else 2
    mlp_weights = mlp_matrices * h * i * experts + (h * experts if arch.is_moe else 0)
    mlp_biases = 2 * experts if counts.per_layer_mlp > mlp_weights else 0
    mlp = mlp_matrices * experts + (1 if arch.is_moe else 0) + mlp_biases
    norms = round(counts.per_layer_norm / h) if h else 0
    embeddings = max(1, round(counts.embedding / max(arch.vocab_size * h, 1))) if arch.vocab_size else 1
    final = round(counts.final_norm / h) if h else 0
    head = 1 if counts.lm_head else 0
    return arch.num_layers * (attention + mlp + norms) + embeddings + final + head


def _launches(passes: tuple[Pass, ...], tensors: int, elements: float) -> int:
    """Kernel launches of multi-tensor ops (ATen MultiTensorApply: tensors and chunks per launch)."""
    limits = eff.constants().optimizer.max_tensors_per_launch
    chunks = elements / eff.constants().optimizer.chunk_elements + tensors
    by_chunks = math.ceil(chunks / eff.constants().optimizer.max_chunks_per_launch)
    total = 0
    for one in passes:
        by_tensors = math.ceil(tensors / limits[min(one.lists, len(limits)) - 1])
        total += max(by_tensors, by_chunks, 1)
    return total


def optimizer_step(
    optimizer: Optimizer,
    params: float,
    tensors: int,
    gpu: GPU,
    *,
    param_bytes: float,
    grad_bytes: float,
    fp16_scaler: bool = False,
    implementation: Implementation | None = None,
) -> OptimizerStep:
    """Time of one update of ``params`` trainable elements in ``tensors`` tensors on ``gpu``.

    ``param_bytes`` / ``grad_bytes`` are the element sizes of what the optimizer updates (fp32
    master weights and gradients under AMP). ``fp16_scaler``: fp16 AMP's GradScaler unscales the
    gradients first (fused AdamW does that in-kernel). ``implementation`` overrides the default
    of the optimizer name (e.g. 'for-loop' for ``torch.optim.AdamW(foreach=False)``).
    """
    impl = implementation or IMPLEMENTATIONS.get(optimizer, "foreach")
    bw = gpu.mem_bw_bytes_per_s * eff.bandwidth_fraction("stream")
    op_s = eff.constants().host.eager_op_us * 1e-6
    launch_s = eff.constants().host.graph_op_us * 1e-6
    p, g = param_bytes, grad_bytes
    serialized = False  # the host waits for the device once per tensor (Adafactor)
    if impl in {"foreach", "for-loop", "fused"}:
        if impl == "fused":
            passes = _FUSED_ADAMW_PASSES
        else:
            passes = _SGD_PASSES if optimizer == "sgd" else _ADAMW_PASSES
            if fp16_scaler:
                passes = (_UNSCALE_PASS, *passes)
        s = p  # torch optimizers keep their state in the parameter's dtype
        per_param = sum(x.p * p + x.g * g + x.s * s for x in passes)
        if impl == "for-loop":
            launches = len(passes) * tensors
            host = launches * op_s
        else:
            launches = _launches(passes, tensors, params)
            host = len(passes) * op_s + max(launches - len(passes), 0) * launch_s
    elif impl == "bitsandbytes-8bit":
        absmax = 2 * 2 * 4 / 256  # two states' fp32 absmax per 256-element block, read and written
        per_param = 2 * p + g + 4 * 1.0 + absmax
        if fp16_scaler:
            per_param += 2 * g
        launches = tensors + (1 if fp16_scaler else 0)
        host = tensors * eff.constants().optimizer.bnb_host_ops_per_tensor * op_s
    elif impl == "adafactor":
        per_param = eff.constants().optimizer.adafactor_bytes_per_element + (2 * g if fp16_scaler else 0.0)
        ops = eff.constants().optimizer.adafactor_ops_per_tensor
        launches = ops * tensors
        host = launches * op_s
        serialized = True
    else:
        raise ValueError(f"unknown optimizer implementation {impl!r}")
    moved = per_param * params
    device = moved / bw if params else 0.0
    time_s = device + host if serialized else max(device, host)
    bound: Bound = "host" if host > device else "memory_bandwidth"
    return OptimizerStep(
        optimizer, impl, params, tensors, per_param, moved, launches, device, host, time_s, bound
    )
