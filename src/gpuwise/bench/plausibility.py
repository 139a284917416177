"""Is a CPU figure believable? Checked against the estimated peak (matmul) or a per-core range
(DRAM), so a broken measurement or a wrong peak estimate is said, not silently shown."""

from __future__ import annotations

from gpuwise.bench.types import BandwidthFigure, MatmulFigure, percent_of
from gpuwise.diagnose.thresholds import BENCH_CPU_MATMUL_PLAUSIBLE_PCT, BENCH_DRAM_GB_PER_S_PER_CORE


def matmul_verdict(figure: MatmulFigure) -> str:
    pct = percent_of(figure.best_tflops, figure.peak_tflops)
    if pct is None:
        return f"{figure.dtype}: no peak to check against ({figure.peak_source})"
    low, high = BENCH_CPU_MATMUL_PLAUSIBLE_PCT
    word = "plausible" if low <= pct <= high else ("above the estimate" if pct > high else "implausibly low")
    return f"{figure.dtype}: {pct:.0f} % of the estimated peak: {word} (range {low:g}-{high:g} %)"


def dram_verdict(figure: BandwidthFigure, cores: int) -> str:
    low, high = (bound * cores for bound in BENCH_DRAM_GB_PER_S_PER_CORE)
    word = "plausible" if low <= figure.best_gb_per_s <= high else "outside"
    return (
        f"DRAM {figure.name}: {figure.best_gb_per_s:.1f} GB/s is {word} for {cores} cores "
        f"(range {low:g}-{high:g} GB/s)"
    )
