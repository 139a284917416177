"""Runs the benchmarks this machine supports, in order, within the mode's time budget.

Quick mode targets <= 30 s in all (small shapes, short budgets); full mode sweeps MAMF's shapes and
larger arrays. On a machine without a GPU it benchmarks the CPU and says so in the notes.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.bench import allreduce, dataloader, matmul, memory, plausibility, storage, transfers
from gpuwise.bench.cpu_info import CpuInfo, this_cpu
from gpuwise.bench.timing import Samples, event_samples, wall_clock_samples
from gpuwise.bench.torch_import import require_torch
from gpuwise.bench.types import BENCH_DTYPES, BenchMode, BenchResult, MatmulFigure
from gpuwise.errors import GpuwiseError

# Per-mode budgets: seconds of timed calls per matmul shape / STREAM kernel, and sizes.
BUDGETS: dict[str, dict[str, float]] = {
    "quick": {
        "dtype_s": 3.0,
        "shape_s": 0.25,
        "stream_s": 0.5,
        "stream_cap_bytes": 256e6,
        "gpu_stream_floor_bytes": 256 * 2**20,
        "storage_bytes": 64e6,
        "copy_bytes": 64e6,
    },
    "full": {
        "dtype_s": 60.0,
        "shape_s": 1.0,
        "stream_s": 2.0,
        "stream_cap_bytes": 2e9,
        "gpu_stream_floor_bytes": 256 * 2**20,
        "storage_bytes": 1e9,
        "copy_bytes": 1e9,
    },
}
MAX_REPEATS = 20
CPU_MIN_REPEATS = 5  # a median and quartiles need a few calls, whatever the budget

# A progress sink: given a label and a number of steps, returns the function that advances it.
ProgressTask = Callable[[str, int], Callable[[], None]]


def _no_progress(label: str, total: int) -> Callable[[], None]:
    return lambda: None


@dataclass
class BenchOptions:
    """The ``gpuwise bench`` options: mode (quick ≈ 30 s, full), dtypes (None: all the device supports), the
    storage test's directory, and the DataLoader test's ``FILE.py:NAME`` dataset, batch and workers.
    """

    mode: BenchMode = "quick"
    dtypes: tuple[str, ...] | None = None  # None: every dtype the device supports
    data_dir: Path | None = None  # storage: this directory, else a scratch file in the temp dir
    storage: bool = True
    dataset: str | None = None  # FILE.py:NAME, see dataloader.py
    batch_size: int = 32
    num_workers: int = 0


def check_dtypes(dtypes: tuple[str, ...] | None) -> None:
    """Raise ``GpuwiseError`` for a ``--dtype`` that is not one of
    ``BENCH_DTYPES`` (None: nothing to check).
    """
    for dtype in dtypes or ():
        if dtype not in BENCH_DTYPES:
            raise GpuwiseError(f"unknown dtype {dtype!r} for --dtype (one of {', '.join(BENCH_DTYPES)})")


def _gpu_device(torch: Any) -> dict[str, Any]:
    from gpuwise.trace.device import match_catalog

    props = torch.cuda.get_device_properties(0)
    gpu, note = match_catalog(torch.cuda.get_device_name(0), int(props.total_memory))
    return {
        "kind": "cuda",
        "name": torch.cuda.get_device_name(0),
        "count": torch.cuda.device_count(),
        "catalog_id": gpu.id if gpu else None,
        "catalog_note": note,
        "memory_bytes": int(props.total_memory),
        "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
    }


def cpu_matmul(
    torch: Any, cpu: CpuInfo, mode: str, dtypes: tuple[str, ...] | None, progress: ProgressTask
) -> tuple[list[MatmulFigure], list[str]]:
    """The CPU's best matmul per dtype (fp32, bf16, fp16 unless given) over the mode's shape sweep, each with
    its estimated peak; a dtype this torch build cannot multiply on the CPU is skipped with a note. Returns
    ``(figures, notes)``.
    """
    figures, notes = [], []
    shapes = matmul.CPU_SHAPES[mode]
    for dtype in dtypes or ("fp32", "bf16", "fp16"):
        if not matmul.supported(torch, dtype, "cpu"):
            notes.append(f"{dtype} matmul is not supported on this CPU build of torch: skipped")
            continue
        peak, how = cpu.peak_tflops(dtype)
        tick = progress(f"CPU matmul {dtype}", len(shapes))
        figures.append(
            matmul.best_of_sweep(
                dtype,
                shapes,
                _cpu_shape_timer(torch, dtype, mode),
                peak,
                how,
                tick,
                BUDGETS[mode]["dtype_s"],
                rank_by_median=True,
            )
        )
    return figures, notes


def _cpu_shape_timer(torch: Any, dtype: str, mode: str) -> Callable[[matmul.Shape], Samples]:
    def time_shape(shape: matmul.Shape) -> Samples:
        m, n, k = shape
        kind = matmul.torch_dtype(torch, dtype)
        a, b = torch.randn(m, k).to(kind), torch.randn(k, n).to(kind)
        out = torch.empty(m, n, dtype=kind)
        return wall_clock_samples(
            lambda: torch.mm(a, b, out=out),
            1,
            MAX_REPEATS,
            BUDGETS[mode]["shape_s"],
            min_repeats=CPU_MIN_REPEATS,
        )

    return time_shape


def _gpu_shape_timer(torch: Any, dtype: str, mode: str) -> Callable[[matmul.Shape], Samples]:
    def time_shape(shape: matmul.Shape) -> Samples:
        m, n, k = shape
        kind = matmul.torch_dtype(torch, dtype)
        a = torch.randn(m, k, device="cuda").to(kind)
        b = torch.randn(k, n, device="cuda").to(kind)
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        return event_samples(
            lambda: torch.mm(a, b),
            5,
            10 if mode == "quick" else 50,
            lambda: torch.cuda.Event(enable_timing=True),
            torch.cuda.synchronize,
        )

    return time_shape


def run_bench(options: BenchOptions, progress: ProgressTask = _no_progress) -> BenchResult:
    """Run every benchmark this machine supports and return the figures.

    With a GPU: its matmul, memory, copy and all-reduce figures, plus a quick CPU fp32 matmul for
    comparison; without: the CPU's matmul and DRAM bandwidth, with plausibility notes. Then storage reads
    and, with a dataset, DataLoader throughput. Bad options and a missing torch fail before any work
    (``GpuwiseError``); ``progress`` receives each step's label and size.
    """
    check_dtypes(options.dtypes)
    if options.data_dir is not None and not options.data_dir.exists():
        raise GpuwiseError(f"no such data directory: {options.data_dir}")
    torch = require_torch()
    dataset = dataloader.load_dataset(options.dataset) if options.dataset else None  # bad spec: fail early
    started = time.perf_counter()
    cpu = this_cpu()
    budgets = BUDGETS[options.mode]
    on_gpu = bool(torch.cuda.is_available())
    device: dict[str, Any] = (
        _gpu_device(torch) if on_gpu else {"kind": "cpu", "name": cpu.model, "catalog_id": None}
    )
    device["cpu"] = cpu.to_dict()
    device["torch_threads"] = torch.get_num_threads()
    result = BenchResult(device=device, mode=options.mode)
    if on_gpu:
        _gpu_benchmarks(torch, options, result, progress)
        result.cpu_matmul, notes = cpu_matmul(torch, cpu, "quick", ("fp32",), progress)
        notes += cpu_vs_gpu(result)
    else:
        result.notes.append(
            f"No GPU found (torch.cuda.is_available() is False): benchmarked the CPU, {cpu.model}, "
            f"{cpu.cores} cores, {torch.get_num_threads()} torch threads."
        )
        result.matmul, notes = cpu_matmul(torch, cpu, options.mode, options.dtypes, progress)
        _cpu_memory(torch, cpu, budgets, result, progress)
    result.notes += notes
    if not on_gpu:
        result.notes += [plausibility.matmul_verdict(f, cpu.plausible_pct()) for f in result.matmul]
        result.notes += [plausibility.dram_verdict(f, cpu.cores) for f in result.memory[:1]]
    if options.storage:
        _storage(options, budgets, result, progress)
    if dataset is not None:
        tick = progress("dataloader", 1)
        result.dataloader = dataloader.loader_samples_per_s(
            torch, dataset, options.batch_size, options.num_workers, budgets["stream_s"] * 4
        )
        result.dataloader["dataset"] = options.dataset
        tick()
    result.wall_time_s = time.perf_counter() - started
    result.load_average_1min = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return result


def cpu_vs_gpu(result: BenchResult) -> list[str]:
    """The seeds' CPU-vs-GPU comparison: the GPU's best matmul against the CPU's fp32 best."""
    if not result.cpu_matmul or not result.matmul:
        return []
    cpu_best = result.cpu_matmul[0].best_tflops
    best = max(result.matmul, key=lambda f: f.best_tflops)
    return [
        f"GPU {best.dtype} matmul is {best.best_tflops / cpu_best:,.0f}x this CPU's fp32 "
        f"({best.best_tflops:,.1f} vs {cpu_best:,.3f} TFLOPS)"
    ]


def _cpu_memory(
    torch: Any, cpu: CpuInfo, budgets: dict[str, float], result: BenchResult, progress: ProgressTask
) -> None:
    elements = memory.stream_elements(
        cpu.last_level_cache_bytes, 4, 64 << 20, int(budgets["stream_cap_bytes"])
    )
    kernels = memory.stream_kernels(torch, elements, "cpu")
    tick = progress("DRAM bandwidth (STREAM)", len(kernels))
    for name, kernel in kernels.items():
        samples = wall_clock_samples(kernel, 1, MAX_REPEATS, budgets["stream_s"])
        result.memory.append(memory.stream_figure(name, elements, 4, samples, None))
        tick()


def _gpu_benchmarks(torch: Any, options: BenchOptions, result: BenchResult, progress: ProgressTask) -> None:
    from gpuwise.catalog.gpus import get_gpu

    gpu = get_gpu(result.device["catalog_id"]) if result.device["catalog_id"] else None
    if gpu is None:
        result.notes.append(f"{result.device['name']} is not in the GPU catalog: no % of datasheet peak")
    shapes = matmul.GPU_SHAPES[options.mode]
    for dtype in options.dtypes or ("fp32", "tf32", "bf16", "fp16"):
        if not matmul.supported(torch, dtype, "cuda"):
            result.notes.append(f"{dtype} matmul is not supported on this GPU: skipped")
            continue
        peak = gpu.peak_tflops(dtype) if gpu else None
        tick = progress(f"GPU matmul {dtype}", len(shapes))
        result.matmul.append(
            matmul.best_of_sweep(
                dtype,
                shapes,
                _gpu_shape_timer(torch, dtype, options.mode),
                peak,
                "catalog datasheet (dense)",
                tick,
            )
        )
    torch.backends.cuda.matmul.allow_tf32 = False
    budgets = BUDGETS[options.mode]
    l2 = result.device.get("l2_cache_bytes")
    elements = memory.stream_elements(
        l2, 4, int(budgets["gpu_stream_floor_bytes"]), int(budgets["stream_cap_bytes"]) * 4
    )
    kernels = memory.stream_kernels(torch, elements, "cuda")
    tick = progress("GPU memory bandwidth (STREAM)", len(kernels) + 1)
    for name, kernel in kernels.items():
        samples = event_samples(
            kernel, 3, 20, lambda: torch.cuda.Event(enable_timing=True), torch.cuda.synchronize
        )
        result.memory.append(
            memory.stream_figure(name, elements, 4, samples, gpu.mem_bw_tbps * 1000 if gpu else None)
        )
        tick()
    size = int(budgets["copy_bytes"])
    result.transfers += transfers.host_device_copies(torch, size, 10, gpu.pcie_gbps if gpu else None)
    tick()
    count = int(result.device["count"])
    if count >= 2:
        link = gpu.nvlink_gbps / 2 if gpu and gpu.nvlink_gbps else (gpu.pcie_gbps if gpu else None)
        tick = progress("GPU<->GPU and all-reduce", 2)
        result.transfers.append(transfers.device_to_device(torch, size, 10, link))
        tick()
        result.transfers.append(allreduce.all_reduce_figure(count, size, 10, "nccl", link))
        tick()
    else:
        result.notes.append("one GPU: no device-to-device or all-reduce figures")


def _storage(
    options: BenchOptions, budgets: dict[str, float], result: BenchResult, progress: ProgressTask
) -> None:
    tick = progress("storage reads", 1)
    budget = int(budgets["storage_bytes"])
    if options.data_dir is not None:
        result.storage = storage.storage_figures(options.data_dir, budget)
    else:
        with tempfile.TemporaryDirectory(prefix="gpuwise-bench-") as scratch:
            path = storage.scratch_file(Path(scratch), budget)
            result.storage = storage.storage_figures(path, budget)
        result.notes.append(
            f"storage: a {budget / 1e6:,.0f} MB scratch file in {tempfile.gettempdir()} "
            "(give --data DIR to measure your dataset's disk)"
        )
    tick()


__all__ = [
    "BUDGETS",
    "BenchOptions",
    "ProgressTask",
    "check_dtypes",
    "cpu_matmul",
    "cpu_vs_gpu",
    "run_bench",
]
