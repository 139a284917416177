"""The GPU catalog: datasheet specs (dense TFLOPS), interconnect, features and prices.

Every bundled row comes from ``data/gpus.csv`` (each row names its sources in ``spec_source``);
its default on-demand price comes from ``data/prices.csv`` (see ``gpuwise.catalog.prices``).
TFLOPS are **dense** peaks; sparse datasheet figures were halved at the source.
Memory is decimal GB as the datasheets print it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

from gpuwise.errors import GpuwiseError, did_you_mean
from gpuwise.units import GB

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
    price_source: str = ""
    spec_source: str = ""
    confidence: str = ""
    notes: str = ""
    origin: str = field(default="catalog", compare=False)  # 'catalog' or the user file it came from

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * GB)

    @property
    def mem_bw_bytes_per_s(self) -> float:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return float(value)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"yes", "true", "1", "y"}


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
        elif name in {"pcie_gen", "mig_max"}:
            num = _num(value)
            kwargs[name] = int(num) if num is not None else (0 if name == "mig_max" else None)
        elif name != "origin":
            kwargs[name] = "" if value is None else str(value)
    kwargs["id"] = str(row["id"]).strip().lower()
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
    return list(_catalog().values())


def get_gpu(gpu_id: str) -> GPU:
    """Look up a GPU by id (case-insensitive); unknown ids raise with suggestions."""
    key = gpu_id.strip().lower()
    catalog = _catalog()
    if key in catalog:
        return catalog[key]
    raise did_you_mean("GPU", gpu_id, catalog, hint="`gpuwise gpus` lists them")


def clear_cache() -> None:
    _catalog.cache_clear()


def match_device_name(device_name: str) -> str | None:
    """Catalog id for a CUDA/NVML device name ('NVIDIA A100-SXM4-80GB' -> 'a100-80gb-sxm'), if any.

    Every id token with a digit (a100, 80gb, 4090) must appear in the name, so an RTX 3090 is never
    taken for an RTX 4090; among the entries left, the one sharing the most tokens wins.
    """
    import re

    compact = re.sub(r"[^a-z0-9]", "", device_name.lower())
    if not compact:
        return None
    best, best_score = None, 0
    for gpu in list_gpus():
        tokens = [t for t in gpu.id.split("-") if t]
        if not all(t in compact for t in tokens if any(c.isdigit() for c in t)):
            continue
        score = sum(1 for t in tokens if t in compact)
        if score > best_score:
            best, best_score = gpu.id, score
    return best
