"""What a workload's precision means for speed: which peak its matmuls run at and how many
bytes each weight, activation, gradient and cached key/value takes.

Why separate: "nf4" is a storage format (the matmuls run in bf16 after dequantization), "fp8"
runs on fp8 tensor cores only where the GPU has them, and GeForce bf16 rates are the
FP32-accumulate column of the catalog. One function decides this for every model below.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpuwise.catalog import GPU
from gpuwise.errors import GpuwiseError
from gpuwise.perf import efficiency as eff
from gpuwise.workload import Workload
from gpuwise.workload.spec import KvCacheDtype

__all__ = [
    "MXFP4_BYTES",
    "NF4_DQ_BYTES",
    "QUANT_BYTES",
    "NoPeakError",
    "Numerics",
    "dtype_bytes",
    "half_dtype",
    "plain_pytorch",
    "precision_to_dtype",
    "resolve",
    "supported_dtype",
    "uses_torch_autocast",
]


# Quantized weight storage, bytes per weight including block scales:
#   int8: LLM.int8 / fp8-style per-channel scales (negligible) -> 1.0
#   int4: GPTQ/AWQ group 128 with fp16 scale + zero            -> 0.5 + 4/128
#   nf4 : bitsandbytes block 64 with an fp32 absmax             -> 0.5 + 4/64
#   nf4 + double quantization: int8 absmax + fp32 per 256 blocks -> 0.5 + 1/64 + 4/(64*256)
#   fp4 : NVFP4, an FP8 E4M3 scale per 16 weights              -> 0.5 + 1/16
#         (MXFP4, the OCP format AMD runs: an E8M0 scale per 32 -> 0.5 + 1/32)
QUANT_BYTES = {"int8": 1.0, "int4": 0.5 + 4 / 128, "nf4": 0.5 + 4 / 64, "fp8": 1.0, "fp4": 0.5 + 1 / 16}
NF4_DQ_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)
MXFP4_BYTES = 0.5 + 1 / 32
_DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp4": 0.5}
# Where to fall back when a GPU lacks a dtype's tensor cores.
_FALLBACK = {"fp4": "fp8", "fp8": "bf16", "int8": "bf16", "bf16": "fp32", "fp16": "fp32", "tf32": "fp32"}


@dataclass(frozen=True)
class Numerics:
    """Resolved dtypes and byte sizes for one workload on one GPU."""

    compute_dtype: str  # peak used for linear layers: fp32 | tf32 | bf16 | fp16 | fp8 | int8 | fp4
    attention_dtype: str  # peak used for attention: fp32 | bf16 | fp16
    block_weight_bytes: float  # per weight of the blocks' linear layers (quantization applies here)
    other_weight_bytes: float  # embeddings, lm_head, norms (kept in 16-bit by quantizers)
    activation_bytes: float
    grad_bytes: float  # gradient dtype (all-reduce payload)
    kv_bytes: float  # per cached element
    weight_only_quant: bool  # quantized storage, matmuls in 16-bit after dequantization
    notes: tuple[str, ...] = field(default=())
    # Bytes per element of the residual stream and the norms (fp32 under torch.autocast: layer_norm
    # is on autocast's fp32 list and the fp32 stream absorbs each 16-bit branch output).
    stream_bytes: float = 2.0
    # torch.autocast over fp32 weights: every matmul weight is cast to 16-bit on use and its gradient
    # cast back, and each norm output is cast before its matmul.
    autocast: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the resolved numerics (dtypes and bytes per element, notes)."""
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` (fp32 4, bf16/fp16 2, fp8/int8 1, fp4/int4 0.5)."""
    return float(_DTYPE_BYTES[dtype])


class NoPeakError(GpuwiseError, ValueError):
    """The GPU's row gives no peak for a dtype nor any it falls back to (Gaudi 3 has no fp32 figure):
    one line for the user (GpuwiseError), and a ValueError for the callers that probe."""


def supported_dtype(gpu: GPU, dtype: str) -> str:
    """``dtype`` if the GPU has a peak for it, else the next one down that it has."""
    current = dtype
    while gpu.peak_tflops(current) is None:
        if current == "fp32" and gpu.platform == "tpu" and gpu.bf16_tflops:
            return "bf16"  # XLA's DEFAULT precision runs an fp32 dot on a TPU as one bf16 MXU pass (JAX docs)
        if current not in _FALLBACK:
            raise NoPeakError(
                f"{gpu.id} lists no peak for {dtype} or any fallback: use --precision amp-bf16 or bf16 there"
            )
        current = _FALLBACK[current]
    return current


def _half(gpu: GPU) -> str:
    """The 16-bit dtype a framework picks on this GPU (bf16 where it has bf16 tensor cores)."""
    return "bf16" if gpu.bf16_tflops else "fp16"


def half_dtype(gpu: GPU) -> str:
    """The GPU's 16-bit tensor-core dtype (its fp32 fallback on a GPU without 16-bit peaks)."""
    return supported_dtype(gpu, _half(gpu))


def plain_pytorch(workload: Workload) -> bool:
    """Eager PyTorch without a training framework's fused kernels (no framework named, or one of
    efficiency.toml host.eager_frameworks): the model's default for training jobs."""
    framework = workload.framework.strip().lower()
    return not framework or framework in eff.constants().host.eager_frameworks


def uses_torch_autocast(workload: Workload) -> bool:
    """AMP as plain PyTorch does it: torch.autocast over fp32 weights.

    Frameworks that keep activations and working weights in 16-bit with fp32 master weights in
    the optimizer (Megatron/NeMo mixed precision, DeepSpeed, llm-foundry's low-precision LayerNorm
    with FSDP mixed precision, torchtitan's FSDP2 policy) do not pay autocast's casts. A training
    job that names no framework is taken to be plain PyTorch (the model's default).
    """
    return workload.is_training and workload.precision.startswith("amp-") and plain_pytorch(workload)


def resolve(workload: Workload, gpu: GPU, compute_dtype: str | None = None) -> Numerics:
    """Numerics for ``workload`` on ``gpu``. ``compute_dtype`` forces the matmul dtype (e.g. 'fp4'
    for W4A4 NVFP4 engines, which the workload's weight-only 'int4' does not express)."""
    p = workload.precision
    notes: list[str] = []
    training = workload.is_training
    compute, weights, acts, grads, weight_only = _precision(workload, gpu)
    if compute_dtype:
        compute = compute_dtype
        if compute_dtype in QUANT_BYTES and not training:
            weights = QUANT_BYTES[compute_dtype]
            weight_only = False
    resolved = supported_dtype(gpu, compute)
    if resolved != compute:
        if compute == "fp8" and p == "fp8":
            weight_only = True
        resolved = _fallback(gpu, compute, resolved, p, notes)
    attention = resolved if resolved in {"fp32", "bf16", "fp16"} else supported_dtype(gpu, _half(gpu))
    if gpu.consumer and resolved in {"bf16", "fp16", "fp8"}:
        notes.append(
            f"{gpu.id} is a GeForce card: its {resolved} rate is the FP32-accumulate rate PyTorch uses"
        )
    kv = _kv_bytes(workload.kv_cache_dtype, acts)
    other = 4.0 if weights == 4.0 else 2.0
    autocast = uses_torch_autocast(workload)
    stream = 4.0 if (autocast or acts == 4.0) else acts
    return Numerics(
        resolved,
        attention,
        weights,
        other,
        acts,
        grads,
        kv,
        weight_only,
        tuple(notes),
        stream_bytes=stream,
        autocast=autocast,
    )


def _precision(workload: Workload, gpu: GPU) -> tuple[str, float, float, float, bool]:
    """(matmul dtype, bytes per weight, per activation, per gradient, weight-only quantization) of the
    workload's precision on ``gpu`` before any fallback to the dtypes its tensor cores support."""
    p, training = workload.precision, workload.is_training
    if p == "fp32":
        return "fp32", 4.0, 4.0, 4.0, False
    if p in {"amp-bf16", "amp-fp16"}:
        # fp32 parameters, 16-bit autocast activations
        return ("bf16" if p == "amp-bf16" else "fp16"), 4.0, 2.0, 4.0, False
    if p in {"bf16", "fp16"}:
        return p, 2.0, 2.0, 2.0, False
    if p == "fp8":
        # fp8 training keeps 16-bit master weights
        return "fp8", 2.0 if training else QUANT_BYTES["fp8"], 2.0, 2.0, False
    if p == "fp4":
        # Block-scaled FP4 on FP4 tensor cores (W4A4): activations are quantized on the fly, so the
        # matmuls run at the fp4 peak; training keeps 16-bit weights (Transformer Engine's NVFP4 recipe).
        if not gpu.fp4_tflops:
            raise GpuwiseError(
                f"precision fp4 (NVFP4/MXFP4) needs FP4 tensor cores; {gpu.id} has none "
                "(use int4 for weight-only 4-bit, or fp8/bf16)"
            )
        weights = 2.0 if training else (MXFP4_BYTES if gpu.vendor.lower() != "nvidia" else QUANT_BYTES["fp4"])
        return "fp4", weights, 2.0, 2.0, False
    # int8 / int4 / nf4: weight-only storage formats
    weights = NF4_DQ_BYTES if (p == "nf4" and workload.double_quant) else QUANT_BYTES[p]
    return _half(gpu), weights, 2.0, 2.0, True


def _fallback(gpu: GPU, compute: str, resolved: str, precision: str, notes: list[str]) -> str:
    """The matmul dtype when ``gpu`` has no ``compute`` peak (``resolved`` is what it would run at),
    with a note saying so: fp8 weights are dequantized to 16-bit, bf16 falls to the fp32 rate."""
    if compute == "fp8" and precision == "fp8":
        notes.append(
            f"{gpu.id} has no fp8 tensor cores: fp8 weights are dequantized and multiplied in {_half(gpu)}"
        )
        return supported_dtype(gpu, _half(gpu))
    if compute == "bf16" and resolved == "fp32":
        notes.append(
            f"{gpu.id} has no bf16 tensor cores: bf16 matmuls run at the fp32 rate (use fp16 on this GPU)"
        )
    else:
        notes.append(f"{gpu.id} has no {compute} peak: matmuls counted at its {resolved} rate")
    return resolved


def _kv_bytes(kv_dtype: KvCacheDtype, activation_bytes: float) -> float:
    """KV-cache element size; 'auto' follows the activation dtype (vLLM's and HF's default)."""
    if kv_dtype == "auto":
        return activation_bytes
    return dtype_bytes(kv_dtype)


def precision_to_dtype(precision: str) -> str:
    """Map a workload precision or a dtype name to the peak column its matmuls use."""
    mapping = {
        "amp-bf16": "bf16",
        "amp-fp16": "fp16",
        "nf4": "bf16",
        "int4": "bf16",
        "float32": "fp32",
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
    }
    dtype = mapping.get(precision, precision)
    if dtype not in _DTYPE_BYTES:
        raise ValueError(f"unknown precision {precision!r}")
    return dtype
