"""Bytes the speed model needs: weights per GPU, KV cache per token, and the KV budget.

The KV budget (memory left for the cache next to the weights) follows what serving engines do
(efficiency.toml [serving]): memory_utilization × capacity − everything that is not KV cache,
the latter from gpuwise.memory's estimate of the same workload.
"""

from __future__ import annotations

from gpuwise.catalog import GPU, ModelArch
from gpuwise.memory import estimate_memory
from gpuwise.perf import efficiency as eff
from gpuwise.perf.flops import block_linear_params
from gpuwise.perf.numerics import Numerics
from gpuwise.workload import Workload

__all__ = [
    "kv_budget_bytes_per_gpu",
    "kv_bytes_per_token_per_gpu",
    "kv_heads_per_gpu",
    "prefill_workspace_bytes",
    "weight_bytes",
    "weight_bytes_per_gpu",
]


def weight_bytes(arch: ModelArch, num: Numerics) -> float:
    """Whole-model weight storage: block linears in the (possibly quantized) dtype, the rest in 16/32-bit."""
    total = arch.param_counts().total
    linear = block_linear_params(arch)
    return linear * num.block_weight_bytes + (total - linear) * num.other_weight_bytes


def weight_bytes_per_gpu(arch: ModelArch, num: Numerics, tp: int, pp: int) -> float:
    """Tensor and pipeline parallelism split every weight matrix (vocab-parallel embeddings too)."""
    return weight_bytes(arch, num) / (tp * pp)


def kv_heads_per_gpu(arch: ModelArch, tp: int) -> int:
    """KV heads each tensor-parallel rank stores (replicated when tp exceeds the KV heads)."""
    if tp <= 1:
        return arch.num_kv_heads
    return max(arch.num_kv_heads // tp, 1)


def kv_bytes_per_token_per_gpu(arch: ModelArch, num: Numerics, tp: int, pp: int) -> float:
    """K and V of one token in this GPU's layers and heads."""
    layers = arch.num_layers / pp
    return 2 * layers * kv_heads_per_gpu(arch, tp) * arch.head_dim * num.kv_bytes


def prefill_workspace_bytes(arch: ModelArch, num: Numerics, tp: int) -> float:
    """Activations of one prefill chunk (the engine's max_num_tokens), which the engine reserves."""
    tokens = eff.constants().serving.prefill_chunk_tokens
    per_token = 4 * arch.hidden_size + 3 * arch.intermediate_size / tp + (arch.q_dim + 2 * arch.kv_dim) / tp
    return tokens * per_token * num.activation_bytes


def kv_budget_bytes_per_gpu(
    workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics
) -> tuple[float, str]:
    """Bytes per GPU a serving engine can give the KV cache, and how they were computed.

    Engines take a fixed share of the device (vLLM gpu_memory_utilization, TensorRT-LLM
    kv_cache_free_gpu_mem_fraction; 0.90 by default) and hand what the weights, CUDA context
    and working buffers leave to the cache. Those non-KV bytes come from gpuwise.memory's
    estimate of the same workload with one sequence; for models that are not transformers,
    from weights + context + one prefill chunk.
    """
    share = eff.constants().serving.memory_utilization
    if arch.is_transformer:
        one = (
            workload.with_changes(batch_size=1, concurrency=1)
            if (workload.batch_size, workload.concurrency) != (1, 1)
            else workload
        )
        est = estimate_memory(one, gpu)
        non_kv = est.device_total_bytes - est.breakdown.get("kv_cache", 0.0)
        budget = share * est.gpu_memory_bytes - non_kv
        return max(budget, 0.0), f"gpuwise.memory: {share:.2f} × device memory − weights, context and buffers"
    reserved = (
        weight_bytes_per_gpu(arch, num, workload.tp, workload.pp)
        + eff.constants().serving.context_bytes
        + prefill_workspace_bytes(arch, num, workload.tp)
    )
    return max(
        share * gpu.memory_bytes - reserved, 0.0
    ), "serving rule: 0.90 × memory − weights − CUDA context − prefill chunk"
