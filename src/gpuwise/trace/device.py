"""Which rank and which device a trace came from, from its metadata (and file name as a fallback)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.catalog.device_names import resolve_device
from gpuwise.catalog.gpus import GPU

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)
# Above any job run so far (the largest published training clusters hold ~10^5 GPUs): a header beyond it
# is damaged, and believing it would make the cross-rank "missing ranks" list as long as the number.
MAX_WORLD_SIZE = 1 << 20
# cuBLAS/cuDNN kernel-name prefixes that name an architecture (prefix, catalog GPU, architecture).
# Volta's only tensor-core datacenter part is the V100 (all variants: fp16 125 / fp32 15.7 TFLOPS,
# no bf16). Ampere's "ampere_" is not listed: it names the A100 (16x fp16/fp32) and the A10/RTX 30
# (about 4x) alike.
_ARCH_BY_KERNEL_PREFIX = (("volta_", "v100-sxm2-32gb", "Volta"),)


@dataclass
class RankInfo:
    """Which rank of which job size a trace came from, and where that was read."""

    rank: int | None
    world_size: int | None
    source: str  # 'distributedInfo' | 'file name' | 'unknown'
    backend: str | None

    def to_dict(self) -> dict[str, Any]:
        """The rank fields as a JSON-ready mapping."""
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "source": self.source,
            "backend": self.backend,
        }


@dataclass
class DeviceInfo:
    """The device a trace ran on (name and memory in bytes as the runtime reports them) and the catalog
    GPU it resolves to (catalog.device_names), with a note when that match is not exact."""

    name: str | None  # as the CUDA/ROCm runtime reports it
    memory_bytes: int | None
    kind: str  # cuda | rocm | mtia | cpu
    catalog_id: str | None
    catalog_note: str

    def to_dict(self) -> dict[str, Any]:
        """The device fields as a JSON-ready mapping."""
        return {
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "kind": self.kind,
            "catalog_id": self.catalog_id,
            "catalog_note": self.catalog_note,
        }


def _int(value: Any) -> int | None:
    """An integer as JSON or text holds it (8, 8.0, "8"); None for anything else (true, 8.5, "x")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def rank_info(metadata: dict[str, Any], path: Path) -> tuple[RankInfo, list[str]]:
    """The rank from distributedInfo, else from `rank-N` in the file name; values no job can have are
    dropped, each with a one-line warning naming the header field."""
    info = metadata.get("distributedInfo")
    raw = info if isinstance(info, dict) else {}
    problems = []
    world = _int(raw.get("world_size"))
    if world is None and raw.get("world_size") is not None:
        problems.append(f"distributedInfo.world_size {raw['world_size']!r} is not an integer: ignored")
    elif world is not None and not 1 <= world <= MAX_WORLD_SIZE:
        problems.append(f"distributedInfo.world_size {world} is outside 1..{MAX_WORLD_SIZE:,}: ignored")
        world = None
    rank, source = _int(raw.get("rank")), "distributedInfo"
    if rank is None and raw.get("rank") is not None:
        problems.append(f"distributedInfo.rank {raw['rank']!r} is not an integer: ignored")
    elif rank is not None and not 0 <= rank < MAX_WORLD_SIZE:
        problems.append(f"distributedInfo.rank {rank} is outside 0..{MAX_WORLD_SIZE - 1:,}: ignored")
        rank = None
    if rank is None:
        match = _RANK_IN_NAME.search(path.name)
        rank, source = (int(match.group(1)), "file name") if match else (None, "unknown")
    if rank is not None and world is not None and rank >= world:
        problems.append(f"rank {rank} is not below distributedInfo.world_size {world}: world size ignored")
        world = None
    backend = raw.get("backend") if source == "distributedInfo" else None
    return RankInfo(rank, world, source, None if backend is None else str(backend)), problems


def _gpu_from_kernels(kernel_names: list[str]) -> tuple[str | None, str]:
    """A catalog GPU named by its kernels, when only one GPU with tensor cores has that architecture."""
    for prefix, catalog_id, family in _ARCH_BY_KERNEL_PREFIX:
        if any(n.startswith(prefix) or f" {prefix}" in n for n in kernel_names):
            return catalog_id, (
                f"no deviceProperties in the trace; its {prefix}* kernels are {family}'s: "
                f"taken as {catalog_id} for peak ratios (memory size unknown)"
            )
    return None, "no deviceProperties in the trace"


def device_info(
    metadata: dict[str, Any], kind_hint: str, kernel_names: list[str] | None = None
) -> DeviceInfo:
    """From deviceProperties; without them, from kernel names that only one architecture emits."""
    props = metadata.get("deviceProperties")
    devices = [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []
    if not devices:
        catalog_id, note = _gpu_from_kernels(kernel_names or []) if kind_hint == "cuda" else (None, "")
        return DeviceInfo(None, None, kind_hint, catalog_id, note or "no deviceProperties in the trace")
    name = Counter(str(d.get("name", "")) for d in devices).most_common(1)[0][0] or None
    memory = next(
        (_int(d.get("totalGlobalMem")) for d in devices if str(d.get("name", "")) == (name or "")), None
    )
    kind = kind_hint
    if name and any(s in name.lower() for s in ("radeon", "instinct", "mi2", "mi3", "amd")):
        kind = "rocm"
    match = resolve_device(name, memory, _hip_compute(devices[0]) if kind == "rocm" else None)
    gpu, note = match.gpu, match.note
    return DeviceInfo(name, memory, kind, gpu.id if gpu else None, note)


def _hip_compute(props: dict[str, Any]) -> tuple[int, int] | None:
    """HIP's (major, minor) from a ROCm trace's deviceProperties (gfx942 -> 9, 4), if both are there:
    what is left to name an AMD device whose name is generic ("AMD Radeon Graphics")."""
    major, minor = _int(props.get("computeMajor")), _int(props.get("computeMinor"))
    return None if major is None or minor is None else (major, minor)


def match_catalog(name: str | None, memory_bytes: int | None) -> tuple[GPU | None, str]:
    """The catalog GPU a runtime device name stands for, and a note when the match is not exact
    (catalog.device_names is the one matcher; memory size, bytes, separates a family's variants)."""
    match = resolve_device(name, memory_bytes)
    return match.gpu, match.note


__all__ = ["MAX_WORLD_SIZE", "DeviceInfo", "RankInfo", "device_info", "match_catalog", "rank_info"]
