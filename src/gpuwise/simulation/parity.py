"""Make a fake-CPU run take the code paths a CUDA run takes.

Tensor sizes do not depend on the device, but *which* ops run does: ATen and transformers pick
kernels by device. Each patch below is active only while a simulation runs and names the CUDA
behaviour it reproduces. The CUDA rules assume an Ampere-or-newer GPU (flash attention needs sm80).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = [
    "cuda_code_paths",
    "cuda_dropout",
    "cuda_sdpa",
    "cuda_sdpa_backend",
    "transformers_fake_tensor_fixes",
]


_LOW_PRECISION = (torch.float16, torch.bfloat16)


@contextlib.contextmanager
def cuda_code_paths() -> Iterator[None]:
    """Run the model code as it runs on CUDA (dropout, SDPA kernels, transformers' device checks) while on
    fake tensors."""
    with cuda_dropout(), cuda_sdpa(), transformers_fake_tensor_fixes():
        yield


@contextlib.contextmanager
def cuda_dropout() -> Iterator[None]:
    """Dropout as CUDA runs it: one fused ``native_dropout`` kernel keeping a 1-byte mask.

    ``aten::dropout`` takes the fused kernel only for CUDA-like tensors (ATen Dropout.cpp,
    ``is_fused_kernel_acceptable``); on CPU it multiplies by a noise tensor in the input dtype,
    which would make every dropout mask 2-4x too large here.
    """
    import torch.nn.functional as F

    original = F.dropout

    def fused(
        input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
    ) -> torch.Tensor:
        if not training or p <= 0.0 or p >= 1.0 or input.numel() == 0:
            return original(input, p, training, inplace)
        out = torch.native_dropout(input, p, training)[0]
        return input.copy_(out) if inplace else out

    F.dropout = fused
    try:
        yield
    finally:
        F.dropout = original


def cuda_sdpa_backend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    enable_gqa: bool,
) -> str:
    """The SDPA backend CUDA picks (ATen sdp_utils.cpp: flash, then memory-efficient, then math).

    flash: fp16/bf16, no mask, head dim <= 256 and equal for q/k/v, equal heads or enable_gqa.
    efficient: any float dtype, masks allowed, head dims aligned (8 elements for 16-bit, 4 for fp32),
    equal heads only (no GQA broadcast). Otherwise the math path materialises the scores.
    """
    if query.dim() != 4:
        return "math"
    hq, hk, hv = query.size(-3), key.size(-3), value.size(-3)
    same_heads = hq == hk == hv
    gqa = enable_gqa and hk == hv and hq % hk == 0
    d, dv = query.size(-1), value.size(-1)
    if (
        query.dtype in _LOW_PRECISION
        and attn_mask is None
        and d == key.size(-1) == dv
        and d <= 256
        and (same_heads or gqa)
    ):
        return "flash"
    align = 8 if query.dtype in _LOW_PRECISION else 4
    if same_heads and d % align == 0 and dv % align == 0:
        return "efficient"
    return "math"


@contextlib.contextmanager
def cuda_sdpa() -> Iterator[None]:
    """``F.scaled_dot_product_attention`` with CUDA's backend choice.

    CPU picks differently (no fused kernel with dropout; flash with masks and GQA broadcast that CUDA
    sends to the math path), so the choice is made here. A fused CUDA kernel (flash or
    memory-efficient) is stood in for by the CPU flash op: the same output plus a per-row fp32
    log-sum-exp, and its FLOPs are counted with the flash formula. The math path runs ATen's own
    math composite, which is what CUDA runs too (scores and probabilities upcast to fp32).
    """
    import torch.nn.functional as F

    original = F.scaled_dot_product_attention
    aten = torch.ops.aten

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if torch.is_autocast_enabled("cpu"):
            # CUDA autocast runs SDPA in the lower precision (it is on autocast's fp16/bf16 op list).
            low = torch.get_autocast_dtype("cpu")
            query, key, value = (t.to(low) if t.is_floating_point() else t for t in (query, key, value))
            if attn_mask is not None and attn_mask.is_floating_point():
                attn_mask = attn_mask.to(low)
        backend = cuda_sdpa_backend(query, key, value, attn_mask, enable_gqa)
        if backend == "math":
            return aten._scaled_dot_product_attention_math(
                query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
            )[0]
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            # The memory-efficient kernel takes an additive bias: SDPA converts boolean masks first.
            attn_mask = torch.zeros((), dtype=query.dtype, device=query.device).masked_fill(
                attn_mask.logical_not(), float("-inf")
            )
        return aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
        )[0]

    F.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


@contextlib.contextmanager
def transformers_fake_tensor_fixes() -> Iterator[None]:
    """Keep transformers on the path a real run takes.

    transformers treats fake tensors as "tracing" and then cannot rule out packed sequences, so it
    builds a full 4-D causal mask instead of using SDPA's is_causal (+1.7 % peak on a small model in
    this simulation, with and without this fix). Our inputs are one unpadded sequence per row: say so.
    """
    try:
        from transformers import masking_utils
    except ImportError:
        yield
        return
    original = masking_utils.find_packed_sequence_indices

    def one_sequence_per_row(position_ids: torch.Tensor) -> torch.Tensor | None:
        from torch._subclasses.fake_tensor import FakeTensor

        if isinstance(position_ids, FakeTensor):
            return None
        return original(position_ids)

    masking_utils.find_packed_sequence_indices = one_sequence_per_row
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = original
