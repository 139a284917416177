"""Weight bytes, including quantized layouts.

bitsandbytes 4-bit (nf4 / fp4, what ``int4`` means here) stores two weights per byte plus one fp32
absmax per block of 64 weights: 0.5 + 4/64 = 0.5625 bytes per weight. Double quantization
re-quantizes those absmax values to 8 bit in blocks of 256 with one fp32 scale per block:
0.5 + 1/64 + 4/(64·256) ≈ 0.5159 bytes (Dettmers et al., QLoRA, arXiv:2305.14314 §3; bitsandbytes
``quantize_4bit`` blocksize 64). LLM.int8 (``int8``) stores 1 byte per weight plus an fp32 scale
per output row. Embeddings, norms and biases are not quantized; whether the ``lm_head`` is depends
on the framework (see ``frameworks.py``): transformers/peft keep it in 16-bit, LitGPT's Fabric
plugin converts every ``nn.Linear`` including the head.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuwise.catalog import ModelArch
from gpuwise.memory.frameworks import Profile
from gpuwise.memory.regime import Regime
from gpuwise.memory.shapes import block_linears, resolve_targets
from gpuwise.workload import Workload
from gpuwise.workload.spec import Precision

__all__ = [
    "DQ_BLOCK",
    "FP4_BYTES",
    "NF4_BLOCK",
    "NF4_CHUNK_ELEMENTS",
    "NF4_LEVELS",
    "ParamGroups",
    "fp4_format_for",
    "largest_quantized_matrix",
    "nf4_quantize_transient_bytes",
    "param_groups",
    "quantized_bytes_per_param",
    "quantized_matrix_names",
    "weight_bytes",
]


NF4_BLOCK = 64
DQ_BLOCK = 256
# Block-scaled FP4 (E2M1 values): NVIDIA's NVFP4 adds one FP8 E4M3 scale per 16 values (+ one fp32 scale per
# tensor, negligible); the OCP Microscaling MXFP4 one E8M0 scale per 32 (OCP MX v1.0 spec; NVIDIA
# "Introducing NVFP4" blog, June 2025). Blackwell runs both; AMD's MI355X runs MXFP4.
FP4_BYTES = {"nvfp4": 0.5 + 1 / 16, "mxfp4": 0.5 + 1 / 32}


def fp4_format_for(vendor: str) -> str:
    """The FP4 format a vendor's tensor cores use by default: NVFP4 on NVIDIA, MXFP4 elsewhere."""
    return "nvfp4" if vendor.strip().lower() == "nvidia" else "mxfp4"


def quantized_bytes_per_param(precision: Precision, double_quant: bool, d_in: int) -> float:
    """Stored bytes per weight of a quantized matrix with ``d_in`` input features."""
    if precision in ("nf4", "int4"):
        if double_quant:
            return 0.5 + 1 / NF4_BLOCK + 4 / (NF4_BLOCK * DQ_BLOCK)
        return 0.5 + 4 / NF4_BLOCK
    if precision == "int8":
        return 1.0 + 4 / d_in
    raise ValueError(f"{precision} is not a quantized precision")


@dataclass(frozen=True)
class ParamGroups:
    """Whole-model parameter counts split the way memory terms need them."""

    block_matrices: int  # all linear weights inside the blocks (all layers)
    block_other: int  # biases and norms inside the blocks (all layers)
    embedding: int  # token (+ position) embeddings
    lm_head: int  # 0 when tied
    final_norm: int

    @property
    def total(self) -> int:
        """Every parameter of the model (elements): block matrices and the rest, embeddings, LM head, final
        norm."""
        return self.block_matrices + self.block_other + self.embedding + self.lm_head + self.final_norm


@lru_cache(maxsize=64)  # a pure function of the architecture, asked several times per memory estimate
def param_groups(arch: ModelArch, untie: bool = False) -> ParamGroups:
    """Parameter groups; ``untie`` gives a tied model its own lm_head copy (frameworks that never tie)."""
    counts = arch.param_counts()
    if not arch.is_transformer:
        return ParamGroups(0, counts.total, 0, 0, 0)
    matrices = sum(lin.params for lin in block_linears(arch).values()) * arch.num_layers
    blocks = counts.per_layer * arch.num_layers
    lm_head = counts.lm_head
    if untie and not lm_head and arch.is_decoder:
        lm_head = arch.vocab_size * arch.hidden_size
    return ParamGroups(matrices, blocks - matrices, counts.embedding, lm_head, counts.final_norm)


def quantized_matrix_names(arch: ModelArch, w: Workload, profile: Profile) -> tuple[str, ...]:
    """Block matrices the framework quantizes (all of them, or only LoRA-wrapped ones)."""
    names = tuple(n for n in block_linears(arch) if n != "router")
    if profile.quantize_scope == "lora_targets" and w.is_lora:
        targets = resolve_targets(arch, w.lora_targets)
        return tuple(n for n in names if n in targets)
    return names


def weight_bytes(
    arch: ModelArch, w: Workload, regime: Regime, profile: Profile, fp4_format: str = "nvfp4"
) -> float:
    """Bytes of the model's weights on one full replica (before any sharding or splitting)."""
    groups = param_groups(arch, profile.unties_embeddings)
    if w.precision == "fp4" and not w.is_training:
        # FP4 checkpoints (ModelOpt, llm-compressor) quantize the blocks' linears; embeddings, norms and
        # lm_head stay 16-bit.
        return groups.block_matrices * FP4_BYTES[fp4_format] + (groups.total - groups.block_matrices) * 2.0
    if not regime.quantized:
        return groups.total * regime.param_bytes
    # Frozen quantized base: 16-bit (or fp32 after peft's prepare_model_for_kbit_training) for the rest.
    from gpuwise.memory.activations import kbit_upcast

    other_bytes = 4.0 if kbit_upcast(w, regime, profile) else regime.param_bytes
    linears = block_linears(arch)
    quantized = quantized_matrix_names(arch, w, profile)
    total = 0.0
    for name, lin in linears.items():
        per_param = (
            quantized_bytes_per_param(w.precision, w.double_quant, lin.d_in)
            if name in quantized
            else other_bytes
        )
        total += lin.params * arch.num_layers * per_param
    total += (groups.block_other + groups.embedding + groups.final_norm) * other_bytes
    if groups.lm_head:
        head_q = profile.quantize_lm_head
        per = (
            quantized_bytes_per_param(w.precision, w.double_quant, arch.hidden_size)
            if head_q
            else other_bytes
        )
        total += groups.lm_head * per
    return total


def largest_quantized_matrix(arch: ModelArch, w: Workload, profile: Profile) -> int:
    """Elements of the biggest quantized weight (bitsandbytes dequantizes one at a time)."""
    linears = block_linears(arch)
    sizes = [linears[n].d_in * linears[n].d_out for n in quantized_matrix_names(arch, w, profile)]
    if profile.quantize_lm_head and param_groups(arch, profile.unties_embeddings).lm_head:
        sizes.append(arch.hidden_size * arch.vocab_size)
    return max(sizes, default=0)


# torchao's NF4 quantization (``NF4Tensor.from_tensor``) of one 16-bit matrix on the GPU, per element: the
# 16-bit source and its block-scaled copy, then ``quantize_tensor_nearest``: ``(value - nf4).abs()`` holds
# two (numel × 16) tensors in the source dtype at once (torchao 0.1), or the same for one chunk of 2^20
# elements next to the uint8 indices and the packed halves (torchao >= 0.2, PR #196).
NF4_LEVELS = 16
NF4_CHUNK_ELEMENTS = 1 << 20


def nf4_quantize_transient_bytes(numel: int, source_bytes: float, chunked: bool) -> float:
    """Bytes one torchao NF4 quantization of a ``numel``-element matrix holds beyond the finished weights."""
    copies = 2 * source_bytes  # the source weight and its scaled blocks
    comparison = 2 * NF4_LEVELS * source_bytes  # value - nf4 and its abs, alive together
    if not chunked:
        return numel * (copies + comparison)
    indices = 1.0 + 0.5 + 0.5  # uint8 indices, then the two shifted/or-ed halves
    return numel * (copies + indices) + min(numel, NF4_CHUNK_ELEMENTS) * (comparison + 8.0)  # + int64 argmin
