"""The cheapest catalog GPU that holds a window's peak memory: the "smaller GPU" a FinOps finding proposes.

Memory only (with the rule engine's TARGET_HEADROOM_PCT to spare) and a lower on-demand price than the
GPU's own, same vendor; speed is the user's call (`gpuwise plan --gpu ID` predicts it).
"""

from __future__ import annotations

from typing import Any

from gpuwise.diagnose import thresholds as T


def smaller_gpu(
    current_id: str | None, usd_per_gpu_hour: float | None, peak_bytes: int | None, gpu_hours: float
) -> dict[str, Any] | None:
    if current_id is None or usd_per_gpu_hour is None or not peak_bytes:
        return None
    from gpuwise.catalog.gpus import get_gpu, list_gpus
    from gpuwise.catalog.prices import price

    current = get_gpu(current_id)
    need = peak_bytes / (1 - T.TARGET_HEADROOM_PCT / 100)
    best: tuple[float, Any] | None = None
    for gpu in list_gpus():
        if (
            gpu.vendor != current.vendor
            or gpu.memory_bytes >= current.memory_bytes
            or gpu.memory_bytes < need
        ):
            continue
        listed = price(gpu.id, "on_demand")
        if listed is None or listed.usd_per_gpu >= usd_per_gpu_hour:
            continue
        if best is None or listed.usd_per_gpu < best[0]:
            best = (listed.usd_per_gpu, gpu)
    if best is None:
        return None
    usd, gpu = best
    return {
        "gpu": gpu.id,
        "memory_gb": gpu.memory_gb,
        "usd_per_gpu_hour": usd,
        "current_usd_per_gpu_hour": usd_per_gpu_hour,
        "usd_saved": (usd_per_gpu_hour - usd) * gpu_hours,
    }


__all__ = ["smaller_gpu"]
