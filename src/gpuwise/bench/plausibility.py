"""Is a CPU figure believable? Checked against the estimated peak (matmul) or a per-core range
(DRAM), so a broken measurement or a wrong peak estimate is said, not silently shown."""

from __future__ import annotations

from gpuwise.bench.types import BandwidthFigure, MatmulFigure, percent_of
from gpuwise.diagnose.thresholds import BENCH_DRAM_GB_PER_S_PER_CORE


def matmul_verdict(figure: MatmulFigure, band: tuple[float, float, str]) -> str:
    """One note: the CPU matmul's median (at the best shape) as a % of the peak, and whether that lies in
    ``band`` (low %, high %, why: CpuInfo.plausible_pct, the share a well-tuned SGEMM reaches on the core
    family). Outside it, the note says the figure is not plausible and what that suggests."""
    pct = percent_of(figure.median_tflops_at_best_shape, figure.peak_tflops)
    if pct is None:
        return f"{figure.dtype}: no peak to check against ({figure.peak_source})"
    low, high, why = band
    if pct < low:
        word = "NOT plausible: below the band (a busy or throttled machine, a slow BLAS path, few threads)"
    elif pct > high:
        word = "NOT plausible: above the band (the peak is underestimated: wrong core family or clock)"
    else:
        word = "plausible"
    return f"{figure.dtype}: median {pct:.0f} % of peak: {word} (band {low:g}-{high:g} %: {why})"


def matmul_in_band(figure: MatmulFigure, band: tuple[float, float, str]) -> bool | None:
    """Whether the median lies in the band (None: no peak)."""
    pct = percent_of(figure.median_tflops_at_best_shape, figure.peak_tflops)
    return None if pct is None else band[0] <= pct <= band[1]


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


__all__ = ["dram_verdict", "matmul_in_band", "matmul_verdict"]
