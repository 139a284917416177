"""Which rank and which device a trace came from, from its metadata (and file name as a fallback)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.catalog import list_gpus
from gpuwise.catalog.gpus import GPU
from gpuwise.units import GB

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)
# Family tokens, most specific first; matched against the normalized CUDA device name.
_FAMILIES = (
    "h200",
    "h100",
    "gh200",
    "b200",
    "gb200",
    "a100",
    "a10g",
    "a10",
    "a40",
    "l40s",
    "l40",
    "l4",
    "t4",
    "v100",
    "rtx 4090",
    "rtx 5090",
    "rtx 6000 ada",
    "rtx a6000",
    "mi300x",
    "mi325x",
)


@dataclass
class RankInfo:
    rank: int | None
    world_size: int | None
    source: str  # 'distributedInfo' | 'file name' | 'unknown'
    backend: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "source": self.source,
            "backend": self.backend,
        }


@dataclass
class DeviceInfo:
    name: str | None  # as the CUDA/ROCm runtime reports it
    memory_bytes: int | None
    kind: str  # cuda | rocm | mtia | cpu
    catalog_id: str | None
    catalog_note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "kind": self.kind,
            "catalog_id": self.catalog_id,
            "catalog_note": self.catalog_note,
        }


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def rank_info(metadata: dict[str, Any], path: Path) -> RankInfo:
    info = metadata.get("distributedInfo")
    if isinstance(info, dict) and _int(info.get("rank")) is not None:
        return RankInfo(
            _int(info["rank"]), _int(info.get("world_size")), "distributedInfo", info.get("backend")
        )
    match = _RANK_IN_NAME.search(path.name)
    world = _int(info.get("world_size")) if isinstance(info, dict) else None
    if match:
        return RankInfo(int(match.group(1)), world, "file name", None)
    return RankInfo(None, world, "unknown", None)


def device_info(metadata: dict[str, Any], kind_hint: str) -> DeviceInfo:
    props = metadata.get("deviceProperties")
    devices = [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []
    if not devices:
        return DeviceInfo(None, None, kind_hint, None, "no deviceProperties in the trace")
    name = Counter(str(d.get("name", "")) for d in devices).most_common(1)[0][0] or None
    memory = next(
        (_int(d.get("totalGlobalMem")) for d in devices if str(d.get("name", "")) == (name or "")), None
    )
    kind = kind_hint
    if name and any(s in name.lower() for s in ("radeon", "instinct", "mi2", "mi3", "amd")):
        kind = "rocm"
    gpu, note = match_catalog(name, memory)
    return DeviceInfo(name, memory, kind, gpu.id if gpu else None, note)


def match_catalog(name: str | None, memory_bytes: int | None) -> tuple[GPU | None, str]:
    """The catalog GPU closest to a runtime device name (family, form factor, memory size)."""
    if not name:
        return None, "no device name"
    text = name.lower().replace("nvidia", "").replace("tesla", "").replace("-", " ").replace("_", " ")
    family = next(
        (f for f in _FAMILIES if re.search(rf"(^|\s){re.escape(f)}(\s|$)", " ".join(text.split()))), None
    )
    if family is None:
        return None, f"{name!r} is not in the GPU catalog"
    candidates = [
        g for g in list_gpus() if g.id.replace("-", " ").startswith(family) or family in g.name.lower()
    ]
    if not candidates:
        return None, f"{name!r}: no catalog entry for the {family.upper()} family"
    pcie = "pcie" in text
    same_form = [g for g in candidates if ("pcie" in g.id) == pcie] or candidates
    if memory_bytes:
        best = min(same_form, key=lambda g: abs(g.memory_gb * GB - memory_bytes))
    else:
        best = same_form[0]
    exact = best.name.lower().replace("nvidia", "").split() == text.split()
    return (
        best,
        "" if exact else f"{name!r} matched to catalog entry {best.id!r} (same family, closest memory size)",
    )
