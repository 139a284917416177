"""Is a CPU figure believable? Checked against the estimated peak (matmul) or a per-core range
(DRAM), so a broken measurement or a wrong peak estimate is said, not silently shown."""

from __future__ import annotations

from gpuwise.bench.types import BandwidthFigure, MatmulFigure, percent_of
from gpuwise.diagnose.thresholds import BENCH_CPU_MATMUL_PLAUSIBLE_PCT, BENCH_DRAM_GB_PER_S_PER_CORE


def matmul_verdict(figure: MatmulFigure) -> str:
    """One note: the CPU matmul's best as a % of the estimated peak, and whether that lies in
    ``BENCH_CPU_MATMUL_PLAUSIBLE_PCT``.
    """
    pct = percent_of(figure.best_tflops, figure.peak_tflops)
    if pct is None:
        return f"{figure.dtype}: no peak to check against ({figure.peak_source})"
    low, high = BENCH_CPU_MATMUL_PLAUSIBLE_PCT
    word = "plausible" if low <= pct <= high else ("above the estimate" if pct > high else "implausibly low")
    return f"{figure.dtype}: {pct:.0f} % of the estimated peak: {word} (range {low:g}-{high:g} %)"


def dram_verdict(figure: BandwidthFigure, cores: int) -> str:
    """One note: whether the STREAM figure lies in ``BENCH_DRAM_GB_PER_S_PER_CORE`` × ``cores`` GB/s (Linux
    shows no DRAM datasheet peak to compare with).
    """
    low, high = (bound * cores for bound in BENCH_DRAM_GB_PER_S_PER_CORE)
    word = "plausible" if low <= figure.best_gb_per_s <= high else "outside"
    return (
        f"DRAM {figure.name}: {figure.best_gb_per_s:.1f} GB/s is {word} for {cores} cores "
        f"(range {low:g}-{high:g} GB/s)"
    )


__all__ = ["dram_verdict", "matmul_verdict"]
