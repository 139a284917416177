"""Efficiency constants (package data ``perf/data/efficiency.toml``) and lookups by GPU.

Why a data file: every fraction of peak the model uses is a published figure with its source
next to it, so a reader can check (or override) each one without reading code. The file loads
into the frozen dataclasses below, one per table, so a misspelt or missing key fails at load
with its table named, and mypy checks every use.
"""

from __future__ import annotations

import math
import sys
import types
import typing
from dataclasses import MISSING, dataclass, fields
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from gpuwise.catalog import GPU
from gpuwise.catalog.bundled import bundled_text
from gpuwise.catalog.gpus import GENERATIONS
from gpuwise.perf.prediction import Mode
from gpuwise.workload.spec import Attention

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# Streaming passes (optimizer, elementwise, dequantization) or decode (weights + KV once per token).
BandwidthKind = Literal["decode", "stream"]


@dataclass(frozen=True)
class MamfRow:
    """[mamf.gpu] / [mamf.generation]: large-GEMM fraction of the dense peak (bf16 also for fp16/tf32)."""

    bf16: float
    source: str
    fp8: float | None = None  # None: no fp8 figure, the bf16 fraction applies


@dataclass(frozen=True)
class StackFactors:
    """[stack]: fraction of MAMF a tuned framework keeps over a whole step."""

    training: float
    inference: float


@dataclass(frozen=True)
class Fp32Matmul:
    """[fp32_matmul]: SIMT SGEMM fraction of the fp32 peak, by die kind."""

    datacenter: float
    graphics: float
    graphics_max_tensor_ratio: float  # 16-bit tensor rate / fp32 rate below which a die is "graphics"


@dataclass(frozen=True)
class AttentionRates:
    """[attention.generation] row: attention kernels' fraction of the 16-bit dense peak."""

    training: float  # forward + backward
    inference: float  # forward


@dataclass(frozen=True)
class AttentionTable:
    """[attention]: kernel rates relative to GEMMs, and per-generation fractions of peak."""

    flash_ratio: float
    eager_ratio: float
    generation: dict[str, AttentionRates]


@dataclass(frozen=True)
class Elementwise:
    """[elementwise]: memory-bound work of an eager training step."""

    backward_factor: float
    loss_bytes_per_vocab: float
    fp8_cast_bytes_per_element: float
    autocast_weight_bytes: float
    autocast_kernels_per_layer: int


@dataclass(frozen=True)
class OptimizerConstants:
    """[optimizer]: multi-tensor launch limits and per-implementation costs."""

    fused_adamw_frameworks: tuple[str, ...]
    chunk_elements: int
    max_chunks_per_launch: int
    max_tensors_per_launch: tuple[int, ...]  # for 1, 2, 3, 4 tensor lists
    bnb_host_ops_per_tensor: int
    adafactor_ops_per_tensor: int
    adafactor_bytes_per_element: float


@dataclass(frozen=True)
class Bandwidth:
    """[bandwidth]: fraction of the datasheet memory bandwidth reached."""

    decode_fraction: float
    stream_fraction: float


@dataclass(frozen=True)
class LinkLatency:
    """[comm] latency_us: small-message latency of one collective, microseconds."""

    nvlink: float
    pcie: float
    network: float


@dataclass(frozen=True)
class Comm:
    """[comm]: NCCL bus bandwidth as a fraction of each link's peak, latency, overlap."""

    nvlink_fraction: float
    pcie_fraction: float
    consumer_pcie_factor: float
    network_fraction: float
    latency_us: LinkLatency
    gpus_per_node: int
    overlap_fraction: float


@dataclass(frozen=True)
class Host:
    """[host]: dispatch and launch costs, and which frameworks run which kernels."""

    eager_op_us: float
    graph_op_us: float
    kernels_per_layer_forward: int
    kernels_per_layer_training: int
    engine_step_overhead_ms: float
    fused_lora_frameworks: tuple[str, ...]
    fsdp2_frameworks: tuple[str, ...]
    eager_frameworks: tuple[str, ...]
    half_recompute_selective_frameworks: tuple[str, ...]


@dataclass(frozen=True)
class Serving:
    """[serving]: what a serving engine leaves for the KV cache."""

    memory_utilization: float
    context_bytes: int
    prefill_chunk_tokens: int


@dataclass(frozen=True)
class Cnn:
    """[cnn]: conv nets' fractions of peak (their FLOPs come from gpuwise.vision's layer lists)."""

    training_fraction: float
    inference_fraction: float


@dataclass(frozen=True)
class GemmCurve:
    """[fp4_gemm_sm100]: a measured GEMM kernel's rate by token count (M) on one GPU, for the regime
    where the roofline's fixed fractions do not hold (small and medium M)."""

    tokens: tuple[float, ...]
    tflops: tuple[float, ...]
    peak_tflops: float  # the dense peak of the GPU it was measured on
    source: str


@dataclass(frozen=True)
class MamfTable:
    """[mamf]: per-GPU figures where published, per-generation defaults otherwise."""

    gpu: dict[str, MamfRow]
    generation: dict[str, MamfRow]


@dataclass(frozen=True)
class Efficiency:
    """The whole of efficiency.toml."""

    mamf: MamfTable
    stack: StackFactors
    fp32_matmul: Fp32Matmul
    attention: AttentionTable
    elementwise: Elementwise
    optimizer: OptimizerConstants
    bandwidth: Bandwidth
    comm: Comm
    network_gbps_per_gpu: dict[str, float]
    host: Host
    serving: Serving
    cnn: Cnn
    fp4_gemm_sm100: GemmCurve


D = TypeVar("D", bound="DataclassInstance")


def _convert(kind: Any, value: Any, where: str) -> Any:
    """``value`` as the annotated type ``kind`` (float, int, str, tuple, dict, a dataclass)."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        return None if value is None else _convert(options[0], value, where)
    if origin is tuple:
        return tuple(_convert(typing.get_args(kind)[0], v, where) for v in value)
    if origin is dict:
        value_type = typing.get_args(kind)[1]
        return {str(k): _convert(value_type, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(kind, type) and hasattr(kind, "__dataclass_fields__"):
        return _load(kind, value, where)
    if kind is int and not (isinstance(value, int) and not isinstance(value, bool)):
        raise ValueError(f"efficiency.toml {where} must be an integer, got {value!r}")
    if kind in (int, float, str):
        return kind(value)
    raise TypeError(
        f"efficiency.toml {where}: no conversion to {kind}"
    )  # pragma: no cover - a new field type


def _load(cls: type[D], table: dict[str, Any], where: str) -> D:
    """Build dataclass ``cls`` from a TOML table; unknown or missing keys name the table."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in fields(cls)}
    unknown = set(table) - names
    if unknown:
        raise ValueError(f"efficiency.toml [{where}]: unknown key {sorted(unknown)[0]!r}")
    values = {}
    for f in fields(cls):
        if f.name in table:
            values[f.name] = _convert(hints[f.name], table[f.name], f"{where}.{f.name}".lstrip("."))
        elif f.default is MISSING:
            raise ValueError(f"efficiency.toml [{where}]: missing key {f.name!r}")
    return cls(**values)


@lru_cache(maxsize=1)
def constants() -> Efficiency:
    """The parsed efficiency table (cached; the file ships with the package).

    Tables keyed by generation may only use the catalog's generations (and ``default``), so a typo
    cannot silently send a generation to the default row."""
    text = bundled_text("gpuwise.perf", "data/efficiency.toml")
    table = _load(Efficiency, tomllib.loads(text), "")
    keyed: dict[str, dict[str, Any]] = {
        "mamf.generation": table.mamf.generation,
        "attention.generation": table.attention.generation,
        "network_gbps_per_gpu": table.network_gbps_per_gpu,
    }
    for where, rows in keyed.items():
        unknown = set(rows) - {*GENERATIONS, "default"}
        if unknown:
            raise ValueError(f"efficiency.toml [{where}]: {sorted(unknown)[0]!r} is not a catalog generation")
    return table


@dataclass(frozen=True)
class Mamf:
    """Achievable large-GEMM fraction of the dense peak for one GPU, with where it came from."""

    bf16: float
    fp8: float
    source: str
    measured: bool  # True when published for this GPU id, False when a generation default


# MAMF measured on this GPU model by `gpuwise bench` (`--calibrate RUN`): wins over the table.
MEASURED_MAMF: dict[str, Mamf] = {}


def mamf(gpu: GPU) -> Mamf:
    """The GPU's MAMF: measured by `gpuwise bench --calibrate`, else published for its id, else its
    generation's default (efficiency.toml [mamf])."""
    if gpu.id in MEASURED_MAMF:
        return MEASURED_MAMF[gpu.id]
    table = constants().mamf
    row = table.gpu.get(gpu.id)
    if row is not None:
        return Mamf(row.bf16, _fp8(row), f"{gpu.id}: {row.source}", True)
    gen = gpu.generation
    row = table.generation.get(gen, table.generation["default"])
    return Mamf(row.bf16, _fp8(row), f"{gen} generation default: {row.source}", False)


def _fp8(row: MamfRow) -> float:
    """A MAMF row's fp8 fraction (its bf16 one where it lists none)."""
    return row.bf16 if row.fp8 is None else row.fp8


def stack(kind: Mode) -> float:
    """Framework factor for 'training' or 'inference' (fraction of MAMF reached over a step)."""
    factors = constants().stack
    return factors.training if kind == "training" else factors.inference


def fp32_matmul_fraction(gpu: GPU) -> float:
    """Share of the fp32 peak that fp32 matmuls without TF32 (SIMT SGEMM) reach on this GPU.

    Graphics dies count a second, INT32-shared fp32 datapath in their peak and reach less of it;
    they show as a 16-bit tensor rate only a few times the fp32 rate. AMD runs fp32 GEMMs on its
    matrix cores, so its 16-bit MAMF x stack applies (an assumption).
    """
    table = constants().fp32_matmul
    if gpu.vendor.strip().lower() == "amd":
        return mamf(gpu).bf16 * stack("training")
    half = gpu.bf16_tflops or gpu.fp16_tflops
    if half and gpu.fp32_tflops and half / gpu.fp32_tflops < table.graphics_max_tensor_ratio:
        return table.graphics
    return table.datacenter


def attention_ratio(impl: Attention) -> float:
    """Attention kernel rate relative to GEMMs: flash/sdpa vs eager (materialised scores)."""
    table = constants().attention
    return table.eager_ratio if impl == "eager" else table.flash_ratio


def attention_efficiency(gpu: GPU, kind: Mode = "training", impl: Attention = "sdpa") -> float:
    """Fraction of the 16-bit dense peak attention kernels reach on this GPU ('training' is
    forward + backward, 'inference' forward); eager attention is a fraction of that."""
    table = constants().attention
    row = table.generation.get(gpu.generation, table.generation["default"])
    fraction = row.training if kind == "training" else row.inference
    return fraction * table.eager_ratio if impl == "eager" else fraction


def fp4_gemm_rate(gpu: GPU, tokens: float) -> float | None:
    """FLOP/s an NVFP4 GEMM of ``tokens`` rows reaches on datacenter Blackwell (sm_100), from the measured
    curve (log-interpolated in M, scaled by the GPU's FP4 peak); None elsewhere (no measured curve)."""
    if gpu.arch_target != "sm_100" or not gpu.fp4_tflops:
        return None
    curve = constants().fp4_gemm_sm100
    m = min(max(tokens, curve.tokens[0]), curve.tokens[-1])
    i = next(k for k, t in enumerate(curve.tokens) if t >= m)
    if curve.tokens[i] == m or i == 0:
        rate = curve.tflops[i]
    else:
        lo, hi = math.log(curve.tokens[i - 1]), math.log(curve.tokens[i])
        share = (math.log(m) - lo) / (hi - lo)
        rate = curve.tflops[i - 1] + (curve.tflops[i] - curve.tflops[i - 1]) * share
    return rate * 1e12 * gpu.fp4_tflops / curve.peak_tflops


def bandwidth_fraction(kind: BandwidthKind = "decode") -> float:
    """Fraction of the datasheet memory bandwidth reached by decode or streaming passes."""
    table = constants().bandwidth
    return table.decode_fraction if kind == "decode" else table.stream_fraction


def network_bytes_per_s(gpu: GPU) -> float:
    """Per-GPU bandwidth to other nodes (rail-optimized NIC), bytes/s."""
    table = constants().network_gbps_per_gpu
    return table.get(gpu.generation, table["default"]) * 1e9


def cnn_fraction(kind: Mode) -> float:
    """Fraction of peak conv nets reach in training or inference."""
    table = constants().cnn
    return table.training_fraction if kind == "training" else table.inference_fraction


__all__ = [
    "MEASURED_MAMF",
    "AttentionRates",
    "AttentionTable",
    "Bandwidth",
    "BandwidthKind",
    "Cnn",
    "Comm",
    "Efficiency",
    "Elementwise",
    "Fp32Matmul",
    "GemmCurve",
    "Host",
    "LinkLatency",
    "Mamf",
    "MamfRow",
    "MamfTable",
    "OptimizerConstants",
    "Serving",
    "StackFactors",
    "attention_efficiency",
    "attention_ratio",
    "bandwidth_fraction",
    "cnn_fraction",
    "constants",
    "fp4_gemm_rate",
    "fp32_matmul_fraction",
    "mamf",
    "network_bytes_per_s",
    "stack",
]
