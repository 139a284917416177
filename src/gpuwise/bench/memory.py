"""Memory bandwidth with STREAM's kernels and byte counts (McCalpin, STREAM benchmark definitions):
copy  a = b          counts 2 x N x itemsize bytes (one read, one write per element),
triad a = b + s x c  counts 3 x N x itemsize bytes (two reads, one write).
Write-allocate traffic is not counted, as in STREAM. Arrays are sized to 4x the last-level cache
(STREAM's rule) so the figure is DRAM (or HBM), not cache.
"""

from __future__ import annotations

from typing import Any, Literal

from gpuwise.bench.timing import Samples
from gpuwise.bench.types import BandwidthFigure

StreamKernel = Literal["copy", "triad"]
STREAM_ARRAYS_READ_WRITTEN: dict[StreamKernel, int] = {"copy": 2, "triad": 3}
COUNTING = "STREAM: bytes read + bytes written, no write-allocate"


def stream_bytes(kernel: StreamKernel, elements: int, itemsize: int) -> int:
    """Bytes a STREAM kernel counts over ``elements`` elements: 2 arrays for copy, 3 for triad."""
    return STREAM_ARRAYS_READ_WRITTEN[kernel] * elements * itemsize


def stream_elements(
    last_level_cache_bytes: int | None, itemsize: int, floor_bytes: int, cap_bytes: int
) -> int:
    """Elements per array: 4x the last-level cache, at least `floor_bytes`, at most `cap_bytes`."""
    want = 4 * (last_level_cache_bytes or 0)
    return max(floor_bytes, min(want, cap_bytes)) // itemsize


def stream_figure(
    kernel: StreamKernel, elements: int, itemsize: int, samples: Samples, peak_gb_per_s: float | None
) -> BandwidthFigure:
    """The kernel's bandwidth from its best (fastest) sample, in decimal GB/s, counted as STREAM does."""
    moved = stream_bytes(kernel, elements, itemsize)
    return BandwidthFigure(
        kernel, moved / samples.best_s / 1e9, moved, samples.best_s, peak_gb_per_s, COUNTING
    )


def stream_kernels(torch: Any, elements: int, device: str) -> dict[StreamKernel, Any]:
    """The two kernels as callables on fp32 arrays (allocated once; torch's ops run multithreaded)."""
    a = torch.zeros(elements, dtype=torch.float32, device=device)
    b = torch.ones(elements, dtype=torch.float32, device=device)
    c = torch.full((elements,), 2.0, dtype=torch.float32, device=device)
    scalar = 3.0
    return {
        "copy": lambda: a.copy_(b),
        "triad": lambda: torch.add(b, c, alpha=scalar, out=a),
    }


__all__ = ["COUNTING", "StreamKernel", "stream_bytes", "stream_elements", "stream_figure", "stream_kernels"]
