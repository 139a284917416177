"""Best achievable matmul throughput per dtype over a shape sweep ("MAMF", after the method of
stas00/ml-engineering's mamf-finder): datasheet peaks are rarely reached, and the best any shape
gets is the realistic ceiling to compare a training run's MFU against. The figure is the max over
shapes of each shape's best call; the median of that shape's calls is kept too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from gpuwise.bench.timing import Samples
from gpuwise.bench.types import MatmulFigure

Shape = tuple[int, int, int]


def matmul_flops(m: int, n: int, k: int) -> int:
    """An (m x k) @ (k x n) product: one multiply and one add per inner-product term."""
    return 2 * m * n * k


def tflops(flops: float, seconds: float) -> float:
    """Throughput in TFLOPS (10¹² FLOP/s) of ``flops`` done in ``seconds``."""
    return flops / seconds / 1e12


def shape_sweep(m_values: Iterable[int], n: int, k: int) -> list[Shape]:
    """Vary m with n and k fixed (mamf-finder's quick scan), which walks through wave quantization."""
    return [(m, n, k) for m in m_values]


CPU_SHAPES = {
    "quick": shape_sweep((256, 512, 1024, 2048), 1024, 1024),
    "full": shape_sweep(range(512, 4097, 512), 2048, 2048),
}
GPU_SHAPES = {
    "quick": shape_sweep(range(1024, 8193, 1024), 4096, 4096),
    "full": shape_sweep(range(256, 20481, 256), 4096, 4096),
}


def best_of_sweep(
    dtype: str,
    shapes: list[Shape],
    time_shape: Callable[[Shape], Samples],
    peak_tflops: float | None,
    peak_source: str,
    on_shape: Callable[[], None] = lambda: None,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    rank_by_median: bool = False,
) -> MatmulFigure:
    """Time each shape (smallest first) and keep the best; `time_shape` does the device-specific work.
    Past `budget_s` no further shape starts (slow emulated dtypes on a CPU would take minutes). The best
    shape is the one with the fastest call (MAMF), or with ``rank_by_median`` the fastest median call (a
    CPU shared with other jobs: one lucky call swings the best-of 6x between runs); the figure keeps the
    quartiles of that shape's calls as its spread."""
    best: tuple[float, Shape, Samples] | None = None
    started, tried = clock(), 0
    for shape in shapes:
        if budget_s is not None and tried and clock() - started > budget_s:
            break
        tried += 1
        samples = time_shape(shape)
        rank = tflops(matmul_flops(*shape), samples.median_s if rank_by_median else samples.best_s)
        if best is None or rank > best[0]:
            best = (rank, shape, samples)
        on_shape()
    if best is None:
        raise ValueError("no shapes to benchmark")
    _, shape, samples = best
    flops = matmul_flops(*shape)
    slow_s, fast_s = samples.quartiles_s
    return MatmulFigure(
        dtype,
        tflops(flops, samples.best_s),
        shape,
        tflops(flops, samples.median_s),
        tried,
        peak_tflops,
        peak_source,
        (tflops(flops, slow_s), tflops(flops, fast_s)),
        len(samples.times_s),
    )


def torch_dtype(torch: Any, dtype: str) -> Any:
    """tf32 is fp32 storage with TF32 tensor-core math (set on the backend while it runs)."""
    return {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[
        dtype
    ]


def supported(torch: Any, dtype: str, device: str) -> bool:
    """Whether this build can multiply `dtype` matrices on `device` at all (old CPUs lack fp16 kernels)."""
    if dtype == "tf32" and device == "cpu":
        return False
    try:
        a = torch.ones((8, 8), dtype=torch_dtype(torch, dtype), device=device)
        (a @ a).sum().item()
    except (RuntimeError, TypeError):
        return False
    return True


__all__ = [
    "CPU_SHAPES",
    "GPU_SHAPES",
    "Shape",
    "best_of_sweep",
    "matmul_flops",
    "shape_sweep",
    "supported",
    "tflops",
    "torch_dtype",
]
