"""The GPU catalog: datasheet specs (dense TFLOPS), interconnect, features and prices.

Every bundled row comes from ``data/gpus.csv`` (each row names its sources in ``spec_source``);
its default on-demand price comes from ``data/prices.csv`` (see ``gpuwise.catalog.prices``).
TFLOPS are **dense** peaks; sparse datasheet figures were halved at the source.
Memory is decimal GB as the datasheets print it.

A GPU's identity lives in its row too: ``generation`` (a typed :data:`Generation`, which every feature
and efficiency lookup keys on), ``arch_target`` (the compiler target, ``sm_90`` or ``gfx942``) and
``device_names`` (the names NVML, CUDA and ROCm report for it, ``;``-separated, matched by
:mod:`gpuwise.catalog.device_names`). Adding a GPU is one row; no code names GPUs.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from typing import Any, Literal, get_args

from gpuwise.errors import GpuwiseError, did_you_mean
from gpuwise.units import GB

Generation = Literal[
    "volta",
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
    "cdna3",
    "cdna4",
    "gaudi",
    "tpu",
    "other",
]
"""Accelerator generation: NVIDIA Volta … Blackwell, AMD CDNA3/CDNA4, Intel Gaudi, Google TPU; ``other``
for a user GPU that names none.

Features (bf16, FP8, FlashAttention versions: ``plan/gpu_features.py``) and sourced efficiencies
(``perf/data/efficiency.toml`` ``[mamf.generation]``, ``[attention.generation]``) are keyed by it."""
GENERATIONS: tuple[Generation, ...] = get_args(Generation)

Platform = Literal["cuda", "rocm", "gaudi", "tpu"]
"""The software stack a device runs: CUDA (NVIDIA), ROCm (AMD), Intel Gaudi (SynapseAI) or XLA on a TPU.
Derived from the generation: what plan/memory/fit/cost can model differs (TPUs: JAX/XLA only, no CUDA
kernels; see ``gpuwise.plan.tpu``)."""
_PLATFORM_OF: dict[Generation, Platform] = {"cdna3": "rocm", "cdna4": "rocm", "gaudi": "gaudi", "tpu": "tpu"}
_ARCH_TARGET = re.compile(r"(sm_\d{2,3}|gfx[0-9a-f]{3,4})")

# Precision name -> catalog column holding its dense peak.
_PEAK_COLUMN = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "bf16": "bf16_tflops",
    "fp16": "fp16_tflops",
    "fp8": "fp8_tflops",
    "int8": "int8_tops",
    "fp4": "fp4_tflops",
}


@dataclass(frozen=True)
class GPU:
    """One catalog GPU: datasheet specs (dense peaks in TFLOPS, memory in decimal GB, bandwidth in TB/s),
    identity (generation, compiler target, runtime device names), interconnect, features and price."""

    id: str
    name: str
    vendor: str
    architecture: str
    memory_gb: float  # decimal GB, as on the datasheet
    mem_bw_tbps: float  # TB/s
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    bf16_tflops: float | None = None
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    fp4_tflops: float | None = None
    tdp_w: float | None = None
    nvlink_gbps: float = 0.0  # total bidirectional NVLink (or Infinity Fabric) GB/s per GPU; 0 = none
    pcie_gen: int | None = None
    ecc: bool = False
    mig_max: int = 0
    consumer: bool = False
    cloud_usd_per_hr: float | None = None
    form_factor: str = ""
    memory_type: str = ""
    generation: Generation = "other"
    arch_target: str = (
        ""  # compiler target: 'sm_90' (NVIDIA compute capability 9.0), 'gfx942' (AMD); '' unknown
    )
    device_names: tuple[str, ...] = ()  # names NVML / CUDA / ROCm report, beside `name`
    price_source: str = ""
    spec_source: str = ""
    confidence: str = ""
    notes: str = ""
    origin: str = field(default="catalog", compare=False)  # 'catalog' or the user file it came from

    @property
    def memory_bytes(self) -> int:
        """Device memory in bytes (decimal GB × 10^9)."""
        return int(self.memory_gb * GB)

    @property
    def mem_bw_bytes_per_s(self) -> float:
        """Datasheet memory bandwidth in bytes/s."""
        return self.mem_bw_tbps * 1e12

    @property
    def pcie_gbps(self) -> float:
        """Unidirectional PCIe x16 bandwidth in GB/s (gen3 16, gen4 32, gen5 64)."""
        return {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}.get(self.pcie_gen or 4, 32.0)

    def peak_tflops(self, dtype: str) -> float | None:
        """Dense peak for ``dtype`` (fp32/tf32/bf16/fp16/fp8/int8/fp4), None if unsupported."""
        column = _PEAK_COLUMN.get(dtype)
        if column is None:
            raise ValueError(f"no peak column for dtype {dtype!r}")
        return getattr(self, column)

    @property
    def platform(self) -> Platform:
        """cuda, rocm, gaudi or tpu: from the generation (an AMD user GPU of unknown generation: rocm)."""
        if self.generation in _PLATFORM_OF:
            return _PLATFORM_OF[self.generation]
        return "rocm" if self.vendor.upper() == "AMD" else "cuda"

    @property
    def is_tpu(self) -> bool:
        """True for a Google TPU chip (XLA only: no CUDA kernels, memory and peaks per chip)."""
        return self.platform == "tpu"

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        """(major, minor) as the runtime reports it: CUDA's compute capability for ``sm_XY`` (sm_100 ->
        (10, 0)), HIP's ``major``/``minor`` for ``gfxMMmS`` (gfx942 -> (9, 4), gfx90a -> (9, 0)); None if
        the row names no target. Kineto's deviceProperties carry these as computeMajor/computeMinor."""
        target = self.arch_target
        if target.startswith("sm_"):
            digits = target[3:]
            return int(digits[:-1]), int(digits[-1])
        if target.startswith("gfx"):
            digits = target[3:]
            return int(digits[:-2]), int(digits[-2], 16)
        return None

    def to_dict(self) -> dict[str, Any]:
        """Every column as a JSON-ready mapping (the `gpus --json` GPU object)."""
        return asdict(self)


def _num(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return float(value)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"yes", "true", "1", "y"}


def generation_from_architecture(architecture: str) -> Generation:
    """The generation a free-text architecture names ('Ada Lovelace' -> 'ada'), 'other' if none.

    Only for user entries written before the `generation` column existed (examples/gpus.yaml gives
    `architecture: Ada Lovelace`): bundled rows state their generation, and nothing else parses text."""
    text = architecture.lower().replace("lovelace", "ada")
    return next((g for g in GENERATIONS if g != "other" and g in text), "other")


def _identity(row: dict[str, Any], where: str, gpu_id: str) -> dict[str, Any]:
    """The typed identity columns of a row: generation, arch_target, device_names (a list, or a
    ';'-separated string as in the CSV)."""
    out: dict[str, Any] = {}
    generation = str(row.get("generation") or "").strip().lower()
    if not generation:
        if where == "":
            raise GpuwiseError(f"GPU entry {gpu_id!r} is missing 'generation'")
        generation = generation_from_architecture(str(row.get("architecture") or ""))
    if generation not in GENERATIONS:
        raise GpuwiseError(
            f"{where}GPU entry {gpu_id!r}: generation {generation!r} is not one of {', '.join(GENERATIONS)}"
        )
    out["generation"] = generation
    target = str(row.get("arch_target") or "").strip().lower()
    if target and not _ARCH_TARGET.fullmatch(target):
        raise GpuwiseError(f"{where}GPU entry {gpu_id!r}: arch_target {target!r} is not sm_NN or gfxNNN")
    out["arch_target"] = target
    names = row.get("device_names") or ()
    if isinstance(names, str):
        names = names.split(";")
    out["device_names"] = tuple(n.strip() for n in names if str(n).strip())
    return out


def gpu_from_mapping(row: dict[str, Any], origin: str = "catalog") -> GPU:
    """Build a GPU from a CSV row or a user entry, validating the required fields."""
    where = "" if origin == "catalog" else f"{origin}: "
    if not row.get("id"):
        raise GpuwiseError(f"{where}GPU entry is missing 'id'")
    for required in ("memory_gb", "mem_bw_tbps"):
        if _num(row.get(required)) is None:
            raise GpuwiseError(f"{where}GPU entry {row.get('id', '?')!r} is missing {required!r}")
    known = {f.name for f in fields(GPU)}
    unknown = set(row) - known
    if unknown and origin != "catalog":
        raise GpuwiseError(
            f"{where}GPU entry {row['id']!r} has unknown field(s): {', '.join(sorted(unknown))}"
        )
    numeric = {
        "memory_gb",
        "mem_bw_tbps",
        "fp32_tflops",
        "tf32_tflops",
        "bf16_tflops",
        "fp16_tflops",
        "fp8_tflops",
        "int8_tops",
        "fp4_tflops",
        "tdp_w",
        "cloud_usd_per_hr",
    }
    kwargs: dict[str, Any] = {"origin": origin}
    for name in known & set(row):
        value = row[name]
        if name in numeric:
            kwargs[name] = _num(value)
        elif name in {"ecc", "consumer"}:
            kwargs[name] = _flag(value)
        elif name == "nvlink_gbps":
            kwargs[name] = _num(value) or 0.0
        elif name in {"generation", "arch_target", "device_names"}:
            continue
        elif name in {"pcie_gen", "mig_max"}:
            num = _num(value)
            kwargs[name] = int(num) if num is not None else (0 if name == "mig_max" else None)
        elif name != "origin":
            kwargs[name] = "" if value is None else str(value)
    kwargs["id"] = str(row["id"]).strip().lower()
    kwargs.update(_identity(row, where, kwargs["id"]))
    kwargs.setdefault("name", kwargs["id"])
    kwargs.setdefault("vendor", "")
    kwargs.setdefault("architecture", "")
    return GPU(**kwargs)


@lru_cache(maxsize=1)
def _catalog() -> dict[str, GPU]:
    from gpuwise.catalog.user_files import load_catalog

    return {key: _with_listed_price(gpu) for key, gpu in load_catalog("gpus", gpu_from_mapping).items()}


def _with_listed_price(gpu: GPU) -> GPU:
    """Bundled GPUs take their default $/GPU-hour from prices.csv (the one place prices live)."""
    from gpuwise.catalog.prices import no_price_reason, price

    if gpu.origin != "catalog" or gpu.cloud_usd_per_hr is not None:
        return gpu
    listed = price(gpu.id, "on_demand")
    if listed is None:
        return replace(gpu, price_source=no_price_reason(gpu.id) or "no published on-demand price")
    return replace(
        gpu,
        cloud_usd_per_hr=listed.usd,
        price_source=f"on-demand, {listed.provider}, as of {listed.as_of}: {listed.source}",
    )


def list_gpus() -> list[GPU]:
    """Every catalog GPU, bundled rows first (CSV order), then the user's entries."""
    return list(_catalog().values())


def get_gpu(gpu_id: str) -> GPU:
    """Look up a GPU by id (case-insensitive); unknown ids raise with suggestions."""
    key = gpu_id.strip().lower()
    catalog = _catalog()
    if key in catalog:
        return catalog[key]
    raise did_you_mean("GPU", gpu_id, catalog, hint="`gpuwise gpus` lists them")


def clear_cache() -> None:
    """Forget the loaded catalog (after the user files or GPUWISE_GPUS change)."""
    _catalog.cache_clear()


__all__ = [
    "GENERATIONS",
    "GPU",
    "Generation",
    "Platform",
    "clear_cache",
    "generation_from_architecture",
    "get_gpu",
    "gpu_from_mapping",
    "list_gpus",
]
