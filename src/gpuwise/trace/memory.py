"""Device memory from the ``[memory]`` events ``profile_memory=True`` records.

Since PyTorch 1.10 each event carries the allocator's ``Total Allocated`` and ``Total Reserved``
after the call: their maxima are the peaks ``torch.cuda.max_memory_allocated/reserved`` report.
Older traces (e.g. 2021 Kineto samples) only have the signed ``Bytes`` of each call; their running
sum gives the growth within the traced window, not the absolute peak, and is labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuwise.trace.table import MemoryEvents, distinct

__all__ = ["CUDA_DEVICE_TYPE", "MemoryStats", "memory_stats"]

CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA (HIP builds report CUDA too)


@dataclass
class MemoryStats:
    """Device memory of one rank (bytes): allocator peaks (allocated, reserved) where the events
    carry totals, else the growth within the traced window from allocation deltas (`source`)."""

    events: int
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    window_growth_peak_bytes: int | None  # max running sum of allocations - frees within the trace
    source: str  # 'allocator totals' | 'allocation deltas' | 'none'

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: byte counts as recorded."""
        return {
            "events": self.events,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
            "window_growth_peak_bytes": self.window_growth_peak_bytes,
            "source": self.source,
        }


def memory_stats(memory: MemoryEvents) -> MemoryStats | None:
    """Peaks of the CUDA device's memory events (None when the trace has none)."""
    device = (memory.device_type == CUDA_DEVICE_TYPE) | (
        (memory.device_id >= 0) & np.isnan(memory.device_type)
    )
    if not device.any():
        return None

    def finite(a: np.ndarray) -> np.ndarray:
        return np.where(np.isfinite(a), a, np.nan)

    allocated, reserved = finite(memory.total_allocated[device]), finite(memory.total_reserved[device])
    events = int(device.sum())
    growth = None
    deltas = np.nan_to_num(finite(memory.bytes[device]))
    if deltas.size:
        order = np.argsort(memory.ts[device], kind="stable")
        by_device = np.nan_to_num(memory.device_id[device][order], nan=-1)
        peaks = [np.cumsum(deltas[order][by_device == d]).max() for d in distinct(by_device)]
        growth = int(max(0.0, max(peaks)))
    if np.isfinite(allocated).any():
        return MemoryStats(
            events,
            int(np.nanmax(allocated)),
            int(np.nanmax(reserved)) if np.isfinite(reserved).any() else None,
            growth,
            "allocator totals",
        )
    return MemoryStats(events, None, None, growth, "allocation deltas")
