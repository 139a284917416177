"""What each GPU generation can run: 16-bit and 8/4-bit tensor-core dtypes, FlashAttention, NVLink, MIG.

Derived from the catalog's typed `generation` column (dtypes and kernels follow the generation), with the
catalog's own columns winning where they say more (a peak listed for a dtype, NVLink bandwidth, MIG
slices). Every technique checks these before it proposes a dtype or a kernel.

Sources: NVIDIA Volta, Turing, Ampere (GA100), Ada Lovelace, Hopper (H100) and Blackwell architecture
whitepapers (bf16/TF32 tensor cores from Ampere, FP8 from Ada/Hopper, FP4 from Blackwell); AMD CDNA3
white paper (bf16, TF32, FP8 on MI300); Dao-AILab/flash-attention README (FlashAttention 1.x: Turing
and Ampere; FlashAttention-2: Ampere, Ada, Hopper and later, plus ROCm MI200/MI300; FlashAttention-3:
Hopper).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuwise.catalog import GPU, get_gpu
from gpuwise.catalog.gpus import Generation
from gpuwise.workload import Workload

HalfDtype = Literal["bf16", "fp16"]


@dataclass(frozen=True)
class ArchFeatures:
    """What a generation's tensor cores and kernels support (True: the generation has it)."""

    bf16: bool
    tf32: bool
    fp8: bool
    fp4: bool
    flash_attention: int  # newest FlashAttention major version with kernels for it (0: none)


# Keyed by the catalog's generation column; 'other' (a user GPU naming none) has no row.
ARCH_FEATURES: dict[Generation, ArchFeatures] = {
    "volta": ArchFeatures(bf16=False, tf32=False, fp8=False, fp4=False, flash_attention=0),
    "turing": ArchFeatures(bf16=False, tf32=False, fp8=False, fp4=False, flash_attention=1),
    "ampere": ArchFeatures(bf16=True, tf32=True, fp8=False, fp4=False, flash_attention=2),
    "ada": ArchFeatures(bf16=True, tf32=True, fp8=True, fp4=False, flash_attention=2),
    "hopper": ArchFeatures(bf16=True, tf32=True, fp8=True, fp4=False, flash_attention=3),
    "blackwell": ArchFeatures(bf16=True, tf32=True, fp8=True, fp4=True, flash_attention=2),
    "cdna3": ArchFeatures(bf16=True, tf32=True, fp8=True, fp4=False, flash_attention=2),
    # CDNA4 (MI350X/MI355X): FP8, MXFP6/MXFP4 and bf16 matrix cores, no TF32 (AMD CDNA 4 white paper).
    "cdna4": ArchFeatures(bf16=True, tf32=False, fp8=True, fp4=True, flash_attention=2),
    # Gaudi 3: bf16 and FP8 matrix engines (Intel Gaudi 3 white paper); no FlashAttention CUDA kernels
    # (Intel ships its own fused SDPA).
    "gaudi": ArchFeatures(bf16=True, tf32=False, fp8=True, fp4=False, flash_attention=0),
    # TPU: bf16 MXUs (FP8 only where the row lists an FP8 peak, TPU7x); XLA fuses attention itself.
    "tpu": ArchFeatures(bf16=True, tf32=False, fp8=False, fp4=False, flash_attention=0),
}


@dataclass(frozen=True)
class GpuFeatures:
    """One GPU's features: its generation's, widened by what its catalog row lists (a peak for a dtype,
    NVLink bandwidth, MIG slices). ``architecture`` is the catalog's display text."""

    architecture: str
    bf16: bool
    tf32: bool
    fp8: bool
    fp4: bool
    flash_attention: int
    nvlink: bool
    mig_slices: int


def arch_features(gpu: GPU) -> ArchFeatures | None:
    """The features of the GPU's generation; None for a GPU of unknown generation ('other')."""
    return ARCH_FEATURES.get(gpu.generation)


def features(gpu: GPU) -> GpuFeatures:
    """The generation's features, or (a GPU of unknown generation) what its catalog peaks say."""
    arch = arch_features(gpu)
    return GpuFeatures(
        architecture=gpu.architecture or "unknown",
        bf16=bool(gpu.bf16_tflops) or (arch is not None and arch.bf16),
        tf32=bool(gpu.tf32_tflops) or (arch is not None and arch.tf32),
        fp8=bool(gpu.fp8_tflops) or (arch is not None and arch.fp8),
        fp4=bool(gpu.fp4_tflops) or (arch is not None and arch.fp4),
        flash_attention=arch.flash_attention if arch else (2 if gpu.bf16_tflops else 0),
        nvlink=gpu.nvlink_gbps > 0,
        mig_slices=gpu.mig_max or 0,
    )


def half_dtype(gpu: GPU) -> HalfDtype:
    """The 16-bit dtype to train and serve in: bf16 where the tensor cores have it, else fp16."""
    return "bf16" if features(gpu).bf16 else "fp16"


def gpu_half_dtype(gpu_id: str) -> HalfDtype:
    """:func:`half_dtype` of a catalog GPU by id."""
    return half_dtype(get_gpu(gpu_id))


def unsupported(w: Workload, gpu: GPU) -> list[tuple[dict, str]]:
    """Settings of `w` this GPU cannot run as asked: (the changes that fix them, why), in one edit each."""
    f = features(gpu)
    where = f"{gpu.id} ({f.architecture})"
    out: list[tuple[dict, str]] = []
    if not f.bf16 and w.precision in {"bf16", "amp-bf16"}:
        # Pure fp16 weights overflow in full-parameter training: keep fp32 masters there (fp16 AMP).
        full = w.is_training and not w.is_lora
        changes: dict = {"precision": "amp-fp16" if full else w.precision.replace("bf16", "fp16")}
        if w.lora_dtype == "bf16":
            changes["lora_dtype"] = "fp16"
        scaling = " with loss scaling (GradScaler)" if w.is_training else ""
        out.append((changes, f"{where} has no bf16 tensor cores: use fp16{scaling}"))
    if not f.fp8 and w.precision == "fp8" and w.is_training:
        out.append(({"precision": f"amp-{half_dtype(gpu)}"}, f"{where} has no FP8 tensor cores to train in"))
    if w.attention == "flash" and f.flash_attention < 2 and gpu.vendor.upper() == "NVIDIA":
        out.append(
            (
                {"attention": "sdpa"},
                f"{where} has no FlashAttention-2 kernels (Ampere or newer): use PyTorch SDPA",
            )
        )
    return out


__all__ = [
    "ARCH_FEATURES",
    "ArchFeatures",
    "GpuFeatures",
    "HalfDtype",
    "arch_features",
    "features",
    "gpu_half_dtype",
    "half_dtype",
    "unsupported",
]
