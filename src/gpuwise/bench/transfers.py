"""Copies between host and device (pinned vs pageable, both directions), between devices, and the
all-reduce bus bandwidth, with the definitions nccl-tests uses (its PERFORMANCE.md):
algbw = bytes / time; all-reduce busbw = algbw x 2(n-1)/n, the per-link traffic of a ring, which
makes the figure comparable with the link's hardware bandwidth whatever the number of GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwise.bench.timing import Samples, event_samples
from gpuwise.bench.types import BandwidthFigure

ALGBW = "nccl-tests algbw: bytes / time"
BUSBW = "nccl-tests busbw: algbw x 2(n-1)/n"


def algorithm_bandwidth_gb_per_s(size_bytes: int, seconds: float) -> float:
    """nccl-tests' algbw: bytes / time, in decimal GB/s."""
    return size_bytes / seconds / 1e9


def all_reduce_bus_bandwidth_gb_per_s(size_bytes: int, seconds: float, ranks: int) -> float:
    """nccl-tests' all-reduce busbw: 2(n-1)/n of the algorithm bandwidth (0 for one rank: no traffic)."""
    if ranks < 1:
        raise ValueError("an all-reduce needs at least one rank")
    return algorithm_bandwidth_gb_per_s(size_bytes, seconds) * 2 * (ranks - 1) / ranks


def copy_figure(name: str, size_bytes: int, samples: Samples, peak_gb_per_s: float | None) -> BandwidthFigure:
    """A copy's bandwidth (algbw, decimal GB/s) from its best sample."""
    return BandwidthFigure(
        name,
        algorithm_bandwidth_gb_per_s(size_bytes, samples.best_s),
        size_bytes,
        samples.best_s,
        peak_gb_per_s,
        ALGBW,
    )


def timed_copy(
    dst: Any, src: Any, repeats: int, new_event: Callable[[], Any], synchronize: Callable[[], None]
) -> Samples:
    """`dst.copy_(src)` timed with device events; non_blocking when the host side is pinned (the
    only case where the copy can be asynchronous)."""
    pinned = bool(getattr(src, "is_pinned", lambda: False)() or getattr(dst, "is_pinned", lambda: False)())
    return event_samples(lambda: dst.copy_(src, non_blocking=pinned), 2, repeats, new_event, synchronize)


def host_device_copies(
    torch: Any, size_bytes: int, repeats: int, pcie_gb_per_s: float | None
) -> list[BandwidthFigure]:
    """Host->device and device->host, pinned and pageable, on GPU 0 (CUDA only)."""

    def new_event() -> Any:
        return torch.cuda.Event(enable_timing=True)

    device = torch.empty(size_bytes, dtype=torch.uint8, device="cuda:0")
    figures = []
    for pinned in (True, False):
        host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=pinned)
        kind = "pinned" if pinned else "pageable"
        for name, dst, src in (("host->device", device, host), ("device->host", host, device)):
            samples = timed_copy(dst, src, repeats, new_event, torch.cuda.synchronize)
            figures.append(copy_figure(f"{name} {kind}", size_bytes, samples, pcie_gb_per_s))
    return figures


def device_to_device(
    torch: Any, size_bytes: int, repeats: int, link_gb_per_s: float | None
) -> BandwidthFigure:
    """GPU 0 -> GPU 1 (NVLink or PCIe peer-to-peer when enabled, else staged through the host)."""
    src = torch.empty(size_bytes, dtype=torch.uint8, device="cuda:0")
    dst = torch.empty(size_bytes, dtype=torch.uint8, device="cuda:1")
    with torch.cuda.device(0):
        samples = timed_copy(
            dst, src, repeats, lambda: torch.cuda.Event(enable_timing=True), torch.cuda.synchronize
        )
    peer = torch.cuda.can_device_access_peer(0, 1)
    name = "device->device " + ("peer-to-peer" if peer else "via host (no P2P)")
    return copy_figure(name, size_bytes, samples, link_gb_per_s)


__all__ = [
    "ALGBW",
    "BUSBW",
    "algorithm_bandwidth_gb_per_s",
    "all_reduce_bus_bandwidth_gb_per_s",
    "copy_figure",
    "device_to_device",
    "host_device_copies",
    "timed_copy",
]
