"""FLOPs of one aten op, from torch's own formulas, plus what they miss here.

``torch.utils.flop_counter`` has formulas for matmuls, convolutions and the CUDA attention kernels,
but not for the CPU flash-attention op a fake-CPU run dispatches to (it would silently count 0), and
it counts causal attention as if every query saw every key. Fused causal kernels skip the masked
half, so attention is scaled by the exact fraction of (query, key) pairs the mask keeps.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

__all__ = ["causal_fraction", "is_attention", "op_flops"]


_aten = torch.ops.aten
_CPU_FLASH = _aten._scaled_dot_product_flash_attention_for_cpu
_CPU_FLASH_BACKWARD = _aten._scaled_dot_product_flash_attention_for_cpu_backward
_ATTENTION_FORWARD = {
    _CPU_FLASH,
    _aten._scaled_dot_product_flash_attention,
    _aten._scaled_dot_product_efficient_attention,
    _aten._scaled_dot_product_cudnn_attention,
}
_ATTENTION_BACKWARD = {
    _CPU_FLASH_BACKWARD,
    _aten._scaled_dot_product_flash_attention_backward,
    _aten._scaled_dot_product_efficient_attention_backward,
    _aten._scaled_dot_product_cudnn_attention_backward,
}


def causal_fraction(q_len: int, kv_len: int) -> float:
    """Share of the q_len x kv_len score matrix a top-left-aligned causal mask keeps (SDPA's is_causal)."""
    if q_len <= 0 or kv_len <= 0:
        return 1.0
    if q_len <= kv_len:
        kept = q_len * (q_len + 1) // 2
    else:
        kept = kv_len * (kv_len + 1) // 2 + (q_len - kv_len) * kv_len
    return kept / (q_len * kv_len)


@cache
def _arg_index(func: Any, name: str) -> int | None:
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            return i
    return None


def _arg(func: Any, args: tuple, kwargs: dict, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    index = _arg_index(func, name)
    if index is not None and index < len(args):
        return args[index]
    return default


def is_attention(func: Any) -> bool:
    """Whether an aten op is an attention kernel (SDPA/flash/efficient forward or backward)."""
    packet = func.overloadpacket
    return packet in _ATTENTION_FORWARD or packet in _ATTENTION_BACKWARD


def op_flops(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    """FLOPs ``func`` performs (0 for ops without a formula: elementwise work is not counted)."""
    packet = func.overloadpacket
    if packet in _ATTENTION_FORWARD or packet in _ATTENTION_BACKWARD:
        return _attention_flops(func, args, kwargs)
    formula = flop_registry.get(packet)
    if formula is None:
        return 0
    return int(formula(*args, **kwargs, out_val=out))


def _attention_flops(func: Any, args: tuple, kwargs: dict) -> int:
    if func.overloadpacket in _ATTENTION_FORWARD:
        q, k, v = args[:3]
        flops = sdpa_flop_count(q.shape, k.shape, v.shape)
    else:
        grad_out, q, k, v = args[:4]
        flops = sdpa_backward_flop_count(grad_out.shape, q.shape, k.shape, v.shape)
    if _arg(func, args, kwargs, "is_causal", False):
        flops = int(flops * causal_fraction(q.shape[-2], k.shape[-2]))
    return int(flops)
