"""KV cache: K and V for every cached token in every layer, sized by the KV heads (GQA/MQA-aware).

The bytes of a given number of tokens. How many tokens a serving engine's paged cache holds (the
budget left next to the weights) is ``gpuwise.perf.kv_capacity``: it needs the speed model's numerics.
"""

from __future__ import annotations

from gpuwise.catalog import ModelArch
from gpuwise.workload import Workload

__all__ = ["kv_cache_bytes", "kv_dtype_bytes"]

_KV_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}


def kv_dtype_bytes(w: Workload) -> float:
    """``auto`` follows the compute dtype (16-bit for every precision except fp32)."""
    if w.kv_cache_dtype != "auto":
        return _KV_BYTES[w.kv_cache_dtype]
    return 4.0 if w.precision == "fp32" else 2.0


def kv_cache_bytes(arch: ModelArch, w: Workload, tokens_per_sequence: int, sequences: int) -> float:
    """Per-GPU bytes: 2 (K, V) × layers/pp × KV heads/tp × head_dim × tokens × dtype.

    With tensor parallelism each GPU holds ``num_kv_heads / tp`` heads; when ``tp`` exceeds the KV
    heads they are replicated (one head per GPU), as vLLM and Megatron do.
    """
    kv_heads = max(arch.num_kv_heads // w.tp, 1) if w.tp > 1 else arch.num_kv_heads
    layers = -(-arch.num_layers // w.pp)
    return 2.0 * layers * kv_heads * arch.head_dim * tokens_per_sequence * sequences * kv_dtype_bytes(w)
