"""The node's GPU inventory as the NVIDIA kernel driver lists it, for a GPU NVML cannot open.

A GPU that fell off the bus before the sampler started has no NVML handle, so NVML gives neither its name
nor its UUID; the kernel driver still lists every GPU it bound under ``/proc/driver/nvidia/gpus/<PCI bus
id>/information`` ("Model:", "GPU UUID:"). NVML numbers GPUs in PCI bus order, so the listing sorted by
bus id gives each index its GPU, used only when the driver lists as many GPUs as NVML counts.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["INVENTORY_DIR", "node_gpus"]

INVENTORY_DIR = Path("/proc/driver/nvidia/gpus")


def _fields(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def node_gpus(root: Path | None = None) -> list[tuple[str | None, str]]:
    """(UUID or None, model name) of every GPU the driver lists, in PCI bus order (NVML's index order);
    [] without the driver's listing (no driver, a container without /proc/driver, unreadable)."""
    root = INVENTORY_DIR if root is None else root
    try:
        dirs = sorted(d for d in root.iterdir() if d.is_dir())
    except OSError:
        return []
    out: list[tuple[str | None, str]] = []
    for d in dirs:
        try:
            info = _fields((d / "information").read_text(errors="replace"))
        except OSError:
            return []  # one unreadable entry breaks the index order: use none
        uuid = info.get("GPU UUID") or None
        out.append((None if uuid in (None, "N/A") else uuid, info.get("Model", "")))
    return out
