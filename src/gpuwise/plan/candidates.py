"""Candidate changes to a workload: each is a workload edit the models can re-evaluate.

A generator looks at the workload and its GPU and proposes edits; it never says what an
edit is worth. `techniques.py` re-runs memory and performance on the edited workload for that.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwise.catalog import GPU, get_gpu
from gpuwise.diagnose import thresholds as T
from gpuwise.plan.evidence_sources import kv_bits
from gpuwise.plan.goal import comfortable
from gpuwise.plan.gpu_features import features, half_dtype, unsupported
from gpuwise.plan.types import Outcome, QualityRisk
from gpuwise.plan.xla_advice import expressible
from gpuwise.workload import Workload

__all__ = [
    "GENERATORS",
    "SERVING_MAX_SEQS",
    "Candidate",
    "Evaluate",
    "Generator",
    "adapters",
    "batch_size",
    "bf16_weights",
    "candidates",
    "channels_last",
    "concurrency",
    "divisors",
    "flash_attention",
    "fp8_training",
    "fused_optimizer",
    "generator",
    "gpu_support",
    "grad_checkpointing",
    "kv_cache_fp8",
    "mixed_precision",
    "offload",
    "optimizer_8bit",
    "sharding",
    "weight_quantization",
]

Evaluate = Callable[[Workload], Outcome]

# vLLM's long-standing default cap on sequences per batch (--max-num-seqs 256, vLLM engine arguments docs;
# newer V1 releases raise it on large GPUs): the planner does not batch beyond it.
SERVING_MAX_SEQS = 256
_MAX_BATCH_DOUBLINGS = 6  # try up to 64× the current micro-batch
_DIVISOR_SEARCH_LIMIT = 1 << 14  # trial divisions per divisor search (complete up to n = 2**28)


@dataclass(frozen=True)
class Candidate:
    """One edit to try on a workload: the workload keys it changes, its quality risk, whether it
    saves memory (tried to make a job fit) and whether the GPU requires it (applied first)."""

    id: str
    title: str
    changes: dict[str, Any]
    quality_risk: QualityRisk
    saves_memory: bool = False  # a memory technique (may cost speed): used to make a job fit
    required: bool = False  # the GPU cannot run the workload as asked: applied before anything else


Generator = Callable[[Workload, GPU, Evaluate], "list[Candidate]"]
GENERATORS: list[Generator] = []


def generator(func: Generator) -> Generator:
    """Register a candidate generator (workload, gpu, evaluate) -> candidates: every registered
    generator is asked for every workload the planner tries."""
    GENERATORS.append(func)
    return func


def candidates(workload: Workload, evaluate: Evaluate) -> list[Candidate]:
    """Every applicable edit of ``workload``, in generator order, without duplicates."""
    gpu = get_gpu(workload.gpu)
    seen: set[tuple] = set()
    out = []
    for gen in GENERATORS:
        for cand in gen(workload, gpu, evaluate):
            key = tuple(sorted(cand.changes.items()))
            if not expressible(workload.framework, cand.changes):
                continue  # a PyTorch-library edit (bitsandbytes, DeepSpeed, torch.compile) for JAX/TF
            if key not in seen and any(getattr(workload, k) != v for k, v in cand.changes.items()):
                seen.add(key)
                out.append(cand)
    return out


def _half_dtype(gpu: GPU) -> str | None:
    if features(gpu).bf16:
        return "bf16"
    if gpu.fp16_tflops:
        return "fp16"
    return None


def _flash_capable(gpu: GPU) -> bool:
    # FlashAttention-2 (what attn_implementation="flash_attention_2" loads) needs Ampere or newer.
    return features(gpu).flash_attention >= 2 and gpu.vendor.upper() == "NVIDIA"


def _llm(workload: Workload) -> bool:
    return not workload.is_cv


# --- what the GPU cannot run ------------------------------------------------------------------------


@generator
def gpu_support(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """A dtype or kernel this GPU generation lacks (bf16 on a T4, FlashAttention-2 on a V100)."""
    return [
        Candidate("gpu_support", why[0].upper() + why[1:], changes, "none", required=True)
        for changes, why in unsupported(w, gpu)
    ]


# --- precision -------------------------------------------------------------------------------------


@generator
def mixed_precision(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """fp32 -> bf16/fp16 autocast (training) or 16-bit weights (inference), on a GPU with
    16-bit tensor cores."""
    half = _half_dtype(gpu)
    if w.precision != "fp32" or half is None:
        return []
    if w.is_training:
        return [
            Candidate(
                "mixed_precision", f"Train with {half} autocast (AMP)", {"precision": f"amp-{half}"}, "low"
            )
        ]
    return [
        Candidate(
            "mixed_precision", f"Run inference in {half}", {"precision": half}, "low", saves_memory=True
        )
    ]


@generator
def fp8_training(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """16-bit pretraining or full fine-tuning -> FP8 matmuls, on a GPU with FP8 tensor cores."""
    if (
        w.task not in {"pretrain", "full-finetune"}
        or not features(gpu).fp8
        or w.precision not in {"amp-bf16", "bf16", "amp-fp16", "fp16"}
    ):
        return []
    return [Candidate("fp8_training", "Train the matmuls in FP8", {"precision": "fp8"}, "medium")]


@generator
def bf16_weights(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """Full-parameter training with 16-bit weights and optimizer states (no fp32 master copy)."""
    if (
        w.task not in {"pretrain", "full-finetune"}
        or w.precision not in {"amp-bf16", "amp-fp16"}
        or not features(gpu).bf16
    ):
        return []
    return [
        Candidate(
            "bf16_weights",
            "Keep weights and optimizer states in bf16 (no fp32 master copy)",
            {"precision": "bf16"},
            "medium",
            saves_memory=True,
        )
    ]


@generator
def weight_quantization(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """LLM inference: FP8 (or 8-bit) weights, then 4-bit weights; each halves what the weights
    take and speeds up memory-bound decode."""
    if not w.is_inference or w.is_cv or w.precision in {"int4", "nf4"}:
        return []
    out = []
    if w.precision in {"fp32", "bf16", "fp16", "amp-bf16", "amp-fp16"}:
        if features(gpu).fp8:
            out.append(
                Candidate("weight_fp8", "Serve FP8 weights", {"precision": "fp8"}, "low", saves_memory=True)
            )
        else:
            out.append(
                Candidate(
                    "weight_int8",
                    "Serve INT8 weight-only quantized weights",
                    {"precision": "int8"},
                    "low",
                    saves_memory=True,
                )
            )
    out.append(
        Candidate(
            "weight_int4",
            "Serve 4-bit (AWQ/GPTQ) weights",
            {"precision": "int4"},
            "medium",
            saves_memory=True,
        )
    )
    return out


@generator
def kv_cache_fp8(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """LLM inference with a 16- or 32-bit KV cache -> FP8 cache: twice the sequences in memory."""
    if not w.is_inference or w.is_cv or kv_bits(w) <= T.KV_CACHE_QUANTIZED_BITS:
        return []
    return [
        Candidate("kv_fp8", "Store the KV cache in FP8", {"kv_cache_dtype": "fp8"}, "low", saves_memory=True)
    ]


# --- kernels ---------------------------------------------------------------------------------------


@generator
def flash_attention(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """Transformer on a FlashAttention-capable GPU in 16-bit: no S×S score matrices in memory."""
    if not _llm(w) or w.attention == "flash" or not _flash_capable(gpu) or w.precision == "fp32":
        return []
    return [
        Candidate("flash_attention", "Use FlashAttention", {"attention": "flash"}, "none", saves_memory=True)
    ]


@generator
def fused_optimizer(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """AdamW -> its fused (multi-tensor) kernel: fewer launches, same maths."""
    if not w.is_training or w.optimizer != "adamw":
        return []
    return [Candidate("fused_optimizer", "Use the fused AdamW kernel", {"optimizer": "adamw-fused"}, "none")]


# --- memory for training ---------------------------------------------------------------------------


@generator
def optimizer_8bit(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """AdamW -> 8-bit AdamW (paged for QLoRA): optimizer states in 2 bytes per parameter instead of 8."""
    if not w.is_training or w.optimizer not in {"adamw", "adamw-fused"}:
        return []
    if w.task == "qlora":
        return [
            Candidate(
                "optimizer_8bit",
                "Use paged 8-bit AdamW",
                {"optimizer": "paged-adamw-8bit"},
                "low",
                saves_memory=True,
            )
        ]
    return [
        Candidate(
            "optimizer_8bit",
            "Keep optimizer states in 8 bits",
            {"optimizer": "adamw-8bit"},
            "low",
            saves_memory=True,
        )
    ]


@generator
def grad_checkpointing(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """Training: selective, then full activation checkpointing (memory for recompute time)."""
    if not w.is_training:
        return []
    out = []
    if w.grad_checkpointing == "none" and _llm(w):
        out.append(
            Candidate(
                "grad_checkpointing",
                "Checkpoint activations selectively",
                {"grad_checkpointing": "selective"},
                "none",
                saves_memory=True,
            )
        )
    if w.grad_checkpointing != "full":
        out.append(
            Candidate(
                "grad_checkpointing",
                "Checkpoint every layer's activations",
                {"grad_checkpointing": "full"},
                "none",
                saves_memory=True,
            )
        )
    return out


@functools.lru_cache(maxsize=256)
def divisors(n: int) -> tuple[int, ...]:
    """Divisors of n, ascending. Trial division stops at `_DIVISOR_SEARCH_LIMIT`, so for a huge n
    only the small divisors and their partners n // d are listed: a bounded search for any input."""
    small = [d for d in range(1, min(math.isqrt(n), _DIVISOR_SEARCH_LIMIT) + 1) if n % d == 0]
    return tuple(sorted({*small, *(n // d for d in small)}))


def _largest_passing(sizes: list[int], passes: Callable[[int], bool]) -> int | None:
    """The largest size that passes, for a test that holds up to some size and fails above it
    (memory grows with the micro-batch): a bisection, so a few evaluations for any list."""
    lo, hi = 0, len(sizes)  # sizes[:lo] pass, sizes[hi:] fail
    while lo < hi:
        mid = (lo + hi) // 2
        if passes(sizes[mid]):
            lo = mid + 1
        else:
            hi = mid
    return sizes[lo - 1] if lo else None


@generator
def batch_size(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """Largest micro-batch that fits comfortably (keeping the global batch when accumulation allows),
    or the largest smaller one when the current batch does not fit."""
    if not w.is_training and w.task not in {"cv-inference", "inference"}:
        return []  # serving batches through concurrency (see `concurrency`)
    total = w.batch_size * w.grad_accum
    current = evaluate(w)
    if comfortable(current):
        if w.grad_accum > 1:
            sizes, keep = [d for d in divisors(total) if d > w.batch_size], True
        else:
            sizes, keep = [w.batch_size * 2**k for k in range(1, _MAX_BATCH_DOUBLINGS + 1)], False
        best = _largest_passing(
            sizes,
            lambda size: comfortable(
                evaluate(w.with_changes(batch_size=size, grad_accum=total // size if keep else 1))
            ),
        )
        if best is None:
            return []
        changes = {"batch_size": best, "grad_accum": total // best if keep else 1}
        risk: QualityRisk = "none" if keep or not w.is_training else "changes-training"
        title = f"Raise the micro-batch to {best}" + (
            f" with {total // best}× accumulation (same global batch {w.global_batch})" if keep else ""
        )
        return [Candidate("bigger_batch", title, changes, risk)]
    smaller = [d for d in divisors(total) if d < w.batch_size]
    if not smaller or not w.is_training:
        return []
    fitting = _largest_passing(
        smaller, lambda size: comfortable(evaluate(w.with_changes(batch_size=size, grad_accum=total // size)))
    )
    chosen = smaller[0] if fitting is None else fitting
    return [
        Candidate(
            "smaller_batch",
            f"Lower the micro-batch to {chosen} with {total // chosen}× accumulation (same global batch "
            f"{w.global_batch})",
            {"batch_size": chosen, "grad_accum": total // chosen},
            "none",
            saves_memory=True,
        )
    ]


@generator
def adapters(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """Full fine-tuning -> LoRA, then QLoRA (LoRA on diffusion denoisers): trainable parameters,
    gradients and optimizer states shrink to the adapters'."""
    diffusion = _diffusion(w)
    if diffusion and w.task in {"cv-train", "full-finetune"}:  # LoRA on the denoiser's attention projections
        w = w.with_changes(task="full-finetune")
    elif w.is_cv or w.task not in {"full-finetune", "lora"}:
        return []
    out = []
    base = half_dtype(gpu)
    if w.task == "full-finetune":
        out.append(
            Candidate(
                "lora",
                "Fine-tune LoRA adapters instead of all weights",
                {
                    "task": "lora",
                    "precision": base if w.precision in {"fp32", "amp-bf16", "amp-fp16"} else w.precision,
                },
                "changes-task",
                saves_memory=True,
            )
        )
    if diffusion:
        return out
    out.append(
        Candidate(
            "qlora",
            "QLoRA: LoRA on 4-bit NF4 base weights",
            {"task": "qlora", "precision": "nf4", "double_quant": True},
            "changes-task",
            saves_memory=True,
        )
    )
    return out


@generator
def sharding(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """Data-parallel training on 2+ GPUs: ZeRO-2, then FSDP (ZeRO-3), to shard optimizer states,
    gradients and parameters."""
    if not w.is_training or w.data_parallel < 2:
        return []
    out = []
    if w.sharding in {"none", "ddp", "zero1"}:
        out.append(
            Candidate(
                "sharding",
                f"Shard gradients and optimizer states (ZeRO-2) over {w.data_parallel} GPUs",
                {"sharding": "zero2"},
                "none",
                saves_memory=True,
            )
        )
    if w.sharding not in {"zero3", "fsdp"}:
        out.append(
            Candidate(
                "sharding",
                f"Shard parameters too (FSDP / ZeRO-3) over {w.data_parallel} GPUs",
                {"sharding": "fsdp"},
                "none",
                saves_memory=True,
            )
        )
    return out


@generator
def offload(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """memgaps: ZeRO-Offload / FSDP cpu_offload, memory of last resort (PCIe copies and a host step):
    offered to sharded jobs once activations are checkpointed."""
    if not w.is_training or w.offload != "none" or w.is_lora or w.grad_checkpointing != "full":
        return []
    if w.sharding not in {"zero1", "zero2", "zero3", "fsdp"}:
        return []
    title = "Offload optimizer state to CPU memory (ZeRO-Offload)"
    out = [Candidate("offload", title, {"offload": "optimizer"}, "none", saves_memory=True)]
    if w.sharding in {"zero3", "fsdp"}:
        title = "Offload parameters too (FSDP cpu_offload / ZeRO-Infinity)"
        out.append(Candidate("offload", title, {"offload": "params"}, "none", saves_memory=True))
    return out


# --- vision (helper "vision") ------------------------------------------------------------------------


def _vision_family(w: Workload) -> str | None:
    from gpuwise.vision.architectures import vision_arch

    arch = vision_arch(w.model) if w.model else None
    return arch.family if arch else None


def _diffusion(w: Workload) -> bool:
    return _vision_family(w) in {"unet", "dit", "mmdit"}


@generator
def channels_last(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """NHWC convolutions on tensor cores (16-bit only); diffusers pairs it with torch.compile for UNets."""
    family = _vision_family(w)
    if (
        w.channels_last
        or w.precision == "fp32"
        or family not in {"resnet", "efficientnet", "convnext", "unet"}
    ):
        return []
    title = "Use channels_last (NHWC) for the convolutions" + (
        " and torch.compile the UNet" if family == "unet" else ""
    )
    return [Candidate("channels_last", title, {"channels_last": True}, "none")]


# --- serving ---------------------------------------------------------------------------------------


@generator
def concurrency(w: Workload, gpu: GPU, evaluate: Evaluate) -> list[Candidate]:
    """Serving: more concurrent sequences, up to what the KV cache holds comfortably (and the
    engine's max-num-seqs)."""
    if w.task not in {"serving", "rag"}:
        return []
    current = evaluate(w)
    limit = current.max_concurrency
    if not limit or limit <= w.concurrency:
        return []
    target = min(limit, SERVING_MAX_SEQS)
    while target > w.concurrency and not comfortable(evaluate(w.with_changes(concurrency=target))):
        target = max(w.concurrency, target * 3 // 4)
    if target <= w.concurrency:
        return []
    return [
        Candidate(
            "more_concurrency",
            f"Batch up to {target} requests (continuous batching)",
            {"concurrency": target},
            "none",
        )
    ]
