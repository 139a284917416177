"""The roofline: time of a piece of work from its FLOPs and the bytes it moves.

``step_time_from_flops`` is the one place that turns counted work into seconds; the analytic
model below and the traced simulation (which counts FLOPs with torch) both call it, so a
measured and a predicted step use the same peaks and the same sourced efficiencies. The peaks and
fractions come resolved from :func:`gpuwise.perf.hardware.hardware` (computed once per GPU and dtype).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuwise.catalog import GPU
from gpuwise.errors import GpuwiseError
from gpuwise.perf import efficiency as eff
from gpuwise.perf.hardware import hardware
from gpuwise.perf.numerics import precision_to_dtype, supported_dtype
from gpuwise.perf.prediction import Bound, Mode


@dataclass(frozen=True)
class RooflineTime:
    """Time of one piece of work: the slower of compute and memory traffic, plus fixed overhead."""

    time_s: float
    compute_s: float
    memory_s: float
    overhead_s: float
    bound: Bound
    flops: float
    bytes_moved: float
    dtype: str
    peak_tflops: float
    efficiency: float  # fraction of peak assumed for the FLOPs
    bandwidth_bytes_per_s: float
    bandwidth_fraction: float

    def to_dict(self) -> dict[str, Any]:
        """Every field as a JSON-ready mapping (seconds, FLOPs, bytes, TFLOPS, fractions)."""
        return asdict(self)


def gemm_fraction(gpu: GPU, dtype: str) -> float:
    """Best sustained large-GEMM rate as a fraction of ``dtype``'s dense peak.

    Tensor-core dtypes: the GPU's MAMF. fp32 without TF32 runs on the CUDA cores (SIMT SGEMM),
    which keep a larger share of their much lower peak (efficiency.toml [fp32_matmul]).
    """
    return hardware(gpu, dtype).gemm_fraction


def matmul_efficiency(gpu: GPU, dtype: str, kind: Mode = "training") -> float:
    """Fraction of the dense peak a well-tuned stack reaches on large matmuls: MAMF × stack.

    fp32 (SIMT) matmuls get no stack factor: the framework's launch gaps and non-matmul time
    are a small share of their 16x longer GEMMs, and the sourced fp32 fraction is end to end.
    """
    return hardware(gpu, dtype).matmul_efficiency(kind)


def peak_flops(gpu: GPU, dtype: str) -> float:
    """Dense peak in FLOP/s for ``dtype`` on ``gpu`` (falling back where the GPU lacks it)."""
    context = hardware(gpu, dtype)
    if context.peak_dtype is None:
        supported_dtype(gpu, dtype)  # raises: no peak for dtype or any fallback
    if not context.peak_flops:
        raise GpuwiseError(
            f"GPU {gpu.id!r} has no {dtype} or fp32 peak in the catalog: add fp32_tflops to its entry"
        )
    return context.peak_flops


def mfu_reference(gpu: GPU) -> tuple[float, str]:
    """The peak MFU is quoted against, in FLOP/s, and its dtype: the dense BF16 peak.

    This is the PaLM convention (Chowdhery et al. 2022, appendix B: model FLOPs over the
    hardware's peak matmul throughput in the 16-bit training format), which the MFU figures of
    Megatron-LM, torchtitan and nanoGPT also use. A GPU without BF16 tensor cores (T4, V100) is
    measured against its FP16 peak, one without either against FP32. FP8 and FP4 peaks are never
    the reference: an FP8 run's MFU against its own peak is shown beside it, labelled.
    """
    for dtype in ("bf16", "fp16", "fp32"):
        tflops = gpu.peak_tflops(dtype)
        if tflops:
            return tflops * 1e12, dtype
    raise GpuwiseError(f"GPU {gpu.id!r} has no bf16, fp16 or fp32 peak in the catalog: add one to its entry")


def step_time_from_flops(
    flops: float,
    bytes_moved: float,
    gpu: GPU,
    precision: str = "bf16",
    *,
    kind: Mode = "training",
    efficiency: float | None = None,
    bandwidth_fraction: float | None = None,
    overhead_s: float = 0.0,
) -> RooflineTime:
    """Roofline time for ``flops`` of work that moves ``bytes_moved`` bytes of device memory.

    ``precision`` is a dtype (fp32, tf32, bf16, fp16, fp8, int8, fp4) or a workload precision
    (amp-bf16, nf4, ...). ``kind`` picks the stack factor ('training' or 'inference') used for the
    default efficiency (MAMF × stack, see perf/data/efficiency.toml); ``bandwidth_fraction``
    defaults to the streaming fraction. ``overhead_s`` (host/launch time) is added on top.
    """
    if flops < 0 or bytes_moved < 0:
        raise ValueError("flops and bytes_moved must be non-negative")
    dtype = supported_dtype(gpu, precision_to_dtype(precision))
    context = hardware(gpu, dtype)
    peak = peak_flops(gpu, dtype)
    e = context.matmul_efficiency(kind) if efficiency is None else efficiency
    f = eff.bandwidth_fraction("stream") if bandwidth_fraction is None else bandwidth_fraction
    bw = context.mem_bw_bytes_per_s
    compute_s = flops / (peak * e) if flops else 0.0
    memory_s = bytes_moved / (bw * f) if bytes_moved else 0.0
    busy = max(compute_s, memory_s)
    bound: Bound
    if overhead_s > busy:
        bound = "host"
    else:
        bound = "compute" if compute_s >= memory_s else "memory_bandwidth"
    return RooflineTime(
        time_s=busy + overhead_s,
        compute_s=compute_s,
        memory_s=memory_s,
        overhead_s=overhead_s,
        bound=bound,
        flops=flops,
        bytes_moved=bytes_moved,
        dtype=dtype,
        peak_tflops=peak / 1e12,
        efficiency=e,
        bandwidth_bytes_per_s=bw,
        bandwidth_fraction=f,
    )


__all__ = [
    "RooflineTime",
    "gemm_fraction",
    "matmul_efficiency",
    "mfu_reference",
    "peak_flops",
    "step_time_from_flops",
]
