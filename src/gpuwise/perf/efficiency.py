"""Efficiency constants (package data ``perf/data/efficiency.toml``) and lookups by GPU.

Why a data file: every fraction of peak the model uses is a published figure with its source
next to it, so a reader can check (or override) each one without reading code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from gpuwise.catalog import GPU

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

GENERATIONS = ("hopper", "blackwell", "ampere", "ada", "cdna3", "turing", "volta")


@lru_cache(maxsize=1)
def constants() -> dict[str, Any]:
    """The parsed efficiency table (cached; the file ships with the package)."""
    text = resources.files("gpuwise.perf").joinpath("data/efficiency.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def generation(gpu: GPU) -> str:
    """Architecture generation key ('hopper', 'ampere', ...) from the catalog's architecture text."""
    arch = gpu.architecture.lower()
    for gen in GENERATIONS:
        if gen in arch:
            return gen
    if "lovelace" in arch:
        return "ada"
    return "other"


@dataclass(frozen=True)
class Mamf:
    """Achievable large-GEMM fraction of the dense peak for one GPU, with where it came from."""

    bf16: float
    fp8: float
    source: str
    measured: bool  # True when published for this GPU id, False when a generation default


def mamf(gpu: GPU) -> Mamf:
    table = constants()["mamf"]
    row = table["gpu"].get(gpu.id)
    if row is not None:
        return Mamf(row["bf16"], row.get("fp8", row["bf16"]), f"{gpu.id}: {row['source']}", True)
    gen = generation(gpu)
    row = table["generation"].get(gen, table["generation"]["default"])
    return Mamf(row["bf16"], row.get("fp8", row["bf16"]), f"{gen} generation default: {row['source']}", False)


def stack(kind: str) -> float:
    """Framework factor for 'training' or 'inference' (fraction of MAMF reached over a step)."""
    return float(constants()["stack"][kind])


def fp32_matmul_fraction(gpu: GPU) -> float:
    """Share of the fp32 peak that fp32 matmuls without TF32 (SIMT SGEMM) reach on this GPU.

    Graphics dies count a second, INT32-shared fp32 datapath in their peak and reach less of it;
    they show as a 16-bit tensor rate only a few times the fp32 rate. AMD runs fp32 GEMMs on its
    matrix cores, so its 16-bit MAMF x stack applies (an assumption).
    """
    table = constants()["fp32_matmul"]
    if gpu.vendor.strip().lower() == "amd":
        return mamf(gpu).bf16 * stack("training")
    half = gpu.bf16_tflops or gpu.fp16_tflops
    if half and gpu.fp32_tflops and half / gpu.fp32_tflops < float(table["graphics_max_tensor_ratio"]):
        return float(table["graphics"])
    return float(table["datacenter"])


def optimizer(name: str) -> Any:
    return constants()["optimizer"][name]


def attention_ratio(impl: str) -> float:
    """Attention kernel rate relative to GEMMs: flash/sdpa vs eager (materialised scores)."""
    table = constants()["attention"]
    return float(table["eager_ratio"] if impl == "eager" else table["flash_ratio"])


def attention_efficiency(gpu: GPU, kind: str = "training", impl: str = "sdpa") -> float:
    """Fraction of the 16-bit dense peak attention kernels reach on this GPU ('training' is
    forward + backward, 'inference' forward); eager attention is a fraction of that."""
    table = constants()["attention"]["generation"]
    row = table.get(generation(gpu), table["default"])
    fraction = float(row[kind])
    return fraction * float(constants()["attention"]["eager_ratio"]) if impl == "eager" else fraction


def elementwise(name: str) -> float:
    return float(constants()["elementwise"][name])


def bandwidth_fraction(kind: str = "decode") -> float:
    return float(constants()["bandwidth"][f"{kind}_fraction"])


def network_bytes_per_s(gpu: GPU) -> float:
    """Per-GPU bandwidth to other nodes (rail-optimized NIC), bytes/s."""
    table = constants()["network_gbps_per_gpu"]
    return float(table.get(generation(gpu), table["default"])) * 1e9


def host(name: str) -> Any:
    return constants()["host"][name]


def serving(name: str) -> Any:
    return constants()["serving"][name]


def comm(name: str) -> Any:
    return constants()["comm"][name]


def cnn_gflops_224(model_id: str) -> float | None:
    """Published forward GFLOPs per 224x224 image for a conv net, None if not tabulated."""
    value = constants()["cnn"]["gflops_224"].get(model_id)
    return None if value is None else float(value)


def cnn_fraction(kind: str) -> float:
    return float(constants()["cnn"][f"{kind}_fraction"])
