"""The results of `gpuwise bench`: one figure per measurement, each with its datasheet peak.

Field names in `to_dict` carry their unit (JSON schema 2): `_tflops`, `_gb_per_s` (decimal GB/s,
as datasheets print bandwidth), `_bytes`, `_s`, `_pct` (0-100).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

BenchDtype = Literal["fp32", "tf32", "bf16", "fp16"]
BENCH_DTYPES: tuple[BenchDtype, ...] = get_args(BenchDtype)
DeviceKind = Literal["cpu", "cuda"]
BenchMode = Literal["quick", "full"]


def percent_of(value: float, peak: float | None) -> float | None:
    """``value`` as a % of ``peak``; None when the peak is unknown or 0."""
    return None if not peak else 100.0 * value / peak


@dataclass
class MatmulFigure:
    """The best matmul throughput over the shapes tried for one dtype (MAMF-style: the max, not a mean)."""

    dtype: str
    best_tflops: float
    best_shape_mnk: tuple[int, int, int]
    median_tflops_at_best_shape: float
    shapes_tried: int
    peak_tflops: float | None
    peak_source: str
    # the calls at the best shape: their TFLOPS quartiles (p25, p75) and how many calls were timed
    spread_tflops: tuple[float, float] | None = None
    calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The figure as JSON, with its % of peak (None without a peak)."""
        return {
            "dtype": self.dtype,
            "median_spread_tflops": None if self.spread_tflops is None else list(self.spread_tflops),
            "median_of_peak_pct": percent_of(self.median_tflops_at_best_shape, self.peak_tflops),
            "calls_at_best_shape": self.calls,
            "best_tflops": self.best_tflops,
            "best_shape_mnk": list(self.best_shape_mnk),
            "median_tflops_at_best_shape": self.median_tflops_at_best_shape,
            "shapes_tried": self.shapes_tried,
            "peak_tflops": self.peak_tflops,
            "of_peak_pct": percent_of(self.best_tflops, self.peak_tflops),
            "peak_source": self.peak_source,
        }


@dataclass
class BandwidthFigure:
    """A bandwidth: bytes moved (counted as the definition named in `counting` says) per second."""

    name: str  # e.g. 'copy', 'triad', 'host->device pinned', 'all-reduce busbw'
    best_gb_per_s: float
    bytes_per_iteration: int
    best_time_s: float
    peak_gb_per_s: float | None
    counting: str  # how bytes are counted (STREAM: read + write; nccl-tests: busbw)

    def to_dict(self) -> dict[str, Any]:
        """The figure as JSON, with its % of peak (None without a peak)."""
        return {
            "name": self.name,
            "best_gb_per_s": self.best_gb_per_s,
            "counted_bytes": self.bytes_per_iteration,
            "best_time_s": self.best_time_s,
            "peak_gb_per_s": self.peak_gb_per_s,
            "of_peak_pct": percent_of(self.best_gb_per_s, self.peak_gb_per_s),
            "counting": self.counting,
        }


@dataclass
class StorageFigure:
    """Read throughput of files; `page_cache_fraction` is the share of sampled blocks already cached
    when the timed read started (after asking the kernel to drop them): near 1 means RAM speed, not disk."""

    path: str
    pattern: Literal["sequential", "random"]
    block_bytes: int
    bytes_read: int
    time_s: float
    page_cache_fraction: float | None
    note: str = ""

    @property
    def mb_per_s(self) -> float:
        """Read throughput in decimal MB/s (0 when no time was measured)."""
        return self.bytes_read / self.time_s / 1e6 if self.time_s > 0 else 0.0

    @property
    def reads_per_s(self) -> float:
        """Block reads per second (0 when no time was measured)."""
        return self.bytes_read / self.block_bytes / self.time_s if self.time_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The figure as JSON: throughput in decimal GB/s, the page-cache share as a %."""
        return {
            "path": self.path,
            "pattern": self.pattern,
            "block_bytes": self.block_bytes,
            "bytes_read_bytes": self.bytes_read,
            "time_s": self.time_s,
            "throughput_gb_per_s": self.mb_per_s / 1000,
            "reads_per_s": self.reads_per_s,
            "page_cache_pct": None if self.page_cache_fraction is None else 100 * self.page_cache_fraction,
            "note": self.note,
        }


@dataclass
class BenchResult:
    """Everything one ``gpuwise bench`` measured, each list in the order it ran; ``wall_time_s`` is the whole
    run's wall time and ``load_average_1min`` the load when it ended (None where the OS has none).
    """

    device: dict[str, Any]  # kind, name, catalog_id, and for CPUs model/cores/clock (see cpu_info)
    mode: BenchMode
    matmul: list[MatmulFigure] = field(default_factory=list)
    memory: list[BandwidthFigure] = field(default_factory=list)
    transfers: list[BandwidthFigure] = field(default_factory=list)
    storage: list[StorageFigure] = field(default_factory=list)
    cpu_matmul: list[MatmulFigure] = field(default_factory=list)  # the CPU next to a GPU
    dataloader: dict[str, Any] | None = None  # dataloader.loader_samples_per_s, with --dataset
    notes: list[str] = field(default_factory=list)
    wall_time_s: float = 0.0
    load_average_1min: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON (the ``gpuwise bench --json`` schema)."""
        return {
            "device": self.device,
            "mode": self.mode,
            "matmul": [m.to_dict() for m in self.matmul],
            "memory_bandwidth": [b.to_dict() for b in self.memory],
            "transfers": [b.to_dict() for b in self.transfers],
            "storage": [s.to_dict() for s in self.storage],
            "cpu_matmul": [m.to_dict() for m in self.cpu_matmul],
            "dataloader": self.dataloader,
            "notes": self.notes,
            "wall_time_s": self.wall_time_s,
            "load_average_1min": self.load_average_1min,
        }


__all__ = [
    "BENCH_DTYPES",
    "BandwidthFigure",
    "BenchDtype",
    "BenchMode",
    "BenchResult",
    "DeviceKind",
    "MatmulFigure",
    "StorageFigure",
    "percent_of",
]
