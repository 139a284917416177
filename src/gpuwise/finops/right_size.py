"""Which cheaper, smaller catalog GPU could take a GPU's work: the proposal of the `oversized_gpu` finding.

A candidate must hold the window's peak memory with TARGET_HEADROOM_PCT to spare AND keep up: the observed
busy-while-in-use % is scaled by the larger of the two peak ratios (dense 16-bit tensor TFLOPS, memory
bandwidth), because a history does not say which of the two bounds the work, and the projection must stay
at or under the busy KPI. Busy % is "a kernel ran", an upper bound on how hard the GPU worked, so the
projection errs on the safe side. Same vendor (same software stack); no consumer card for a data-centre GPU
(NVIDIA's GeForce licence excludes data-centre deployment). The dollars are the price difference over the
in-use hours only: the idle hours are `idle_gpu_hours`' to claim, so the two never count a dollar twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuwise.diagnose import thresholds as T

if TYPE_CHECKING:
    from gpuwise.catalog.gpus import GPU


def _tflops16(gpu: GPU) -> float | None:
    return gpu.fp16_tflops or gpu.bf16_tflops


def projected_busy(current: GPU, candidate: GPU, busy_pct: float) -> tuple[float, str]:
    """Busy % the same work would need on ``candidate``, and the limiting resource."""
    ours, theirs = _tflops16(current), _tflops16(candidate)
    compute = ours / theirs if ours and theirs else float("inf")
    bandwidth = current.mem_bw_tbps / candidate.mem_bw_tbps if candidate.mem_bw_tbps else float("inf")
    if compute >= bandwidth:
        return busy_pct * compute, "16-bit tensor TFLOPS"
    return busy_pct * bandwidth, "memory bandwidth"


def right_size(
    current_id: str | None,
    usd_per_gpu_hour: float | None,
    peak_bytes: int | None,
    busy_in_use_pct: float | None,
    in_use_hours: float,
) -> dict[str, Any] | None:
    """``{"gpu": id or None, ...}``: the cheapest qualifying GPU, or None with the closest that fits memory.

    None overall when the GPU, its price, its peak or its busy % is unknown (nothing to judge).
    """
    if current_id is None or usd_per_gpu_hour is None or not peak_bytes or busy_in_use_pct is None:
        return None
    from gpuwise.catalog.gpus import get_gpu, list_gpus
    from gpuwise.catalog.prices import price

    current = get_gpu(current_id)
    need = peak_bytes / (1 - T.TARGET_HEADROOM_PCT / 100)
    fits: list[tuple[float, GPU, float, str]] = []  # (price, gpu, projected busy %, limited by)
    for gpu in list_gpus():
        if (
            gpu.vendor != current.vendor
            or (gpu.consumer and not current.consumer)
            or not need <= gpu.memory_bytes < current.memory_bytes
        ):
            continue
        listed = price(gpu.id, "on_demand")
        if listed is None or listed.usd_per_gpu >= usd_per_gpu_hour:
            continue
        busy, limit = projected_busy(current, gpu, busy_in_use_pct)
        fits.append((listed.usd_per_gpu, gpu, busy, limit))
    fits.sort(key=lambda f: (f[0], f[2]))
    ok = [f for f in fits if f[2] <= T.MONITOR_BUSY_KPI_PCT]
    out: dict[str, Any] = {
        "current_usd_per_gpu_hour": usd_per_gpu_hour,
        "memory_needed_bytes": int(need),
        "busy_in_use_pct": busy_in_use_pct,
        "busy_kpi_pct": T.MONITOR_BUSY_KPI_PCT,
        "in_use_gpu_hours": in_use_hours,
        "gpu": None,
        "usd_saved": 0.0,
        "closest": None,
        "mig_slices": current.mig_max,
    }
    if ok:
        usd, gpu, busy, limit = ok[0]
        out.update(_candidate(gpu, usd, busy, limit))
        out["usd_saved"] = (usd_per_gpu_hour - usd) * in_use_hours
    elif fits:  # the one that comes nearest to keeping up: what "none qualifies" is measured against
        usd, gpu, busy, limit = min(fits, key=lambda f: f[2])
        out["closest"] = _candidate(gpu, usd, busy, limit)
    return out


def _candidate(gpu: GPU, usd: float, busy: float, limit: str) -> dict[str, Any]:
    return {
        "gpu": gpu.id,
        "gpu_name": gpu.name,
        "memory_bytes": gpu.memory_bytes,
        "usd_per_gpu_hour": usd,
        "projected_busy_pct": busy,
        "limited_by": limit,
    }


__all__ = ["projected_busy", "right_size"]
