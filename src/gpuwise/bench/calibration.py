"""`--calibrate RUN` for plan, cost and fit: a bench run's measured MAMF replaces the efficiency
table's for that GPU model (perf/efficiency.py `MEASURED_MAMF`), and the command says so.

The table's fraction is of the dense datasheet peak, and so is a bench figure's `of_peak_pct`: the
best bf16 matmul (else fp16) over the sweep, as the table's sources measured it. fp8 keeps the
table's ratio to bf16 (bench does not measure fp8). Torch-free: it reads the stored JSON only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError

CALIBRATING_DTYPES = ("bf16", "fp16")


def measured_fraction(document: dict[str, Any], run_id: int) -> tuple[str, float, str]:
    """(catalog GPU id, best 16-bit matmul as a fraction of its dense peak, dtype) from a bench run."""
    device = document.get("device") or {}
    if device.get("kind") != "cuda":
        raise GpuwiseError(
            f"bench run {run_id} measured a CPU ({device.get('name', '?')}): "
            "--calibrate needs a GPU bench run"
        )
    gpu_id = device.get("catalog_id")
    if not gpu_id:
        raise GpuwiseError(f"bench run {run_id}: {device.get('name')!r} is not in the GPU catalog")
    by_dtype = {m["dtype"]: m for m in document.get("matmul", []) if m.get("of_peak_pct")}
    for dtype in CALIBRATING_DTYPES:
        if dtype in by_dtype:
            return gpu_id, by_dtype[dtype]["of_peak_pct"] / 100.0, dtype
    raise GpuwiseError(f"bench run {run_id} has no bf16 or fp16 matmul figure to calibrate with")


def apply_calibration(ref: str, store: Path | None = None) -> str:
    """Load bench run `ref` from the run store, install its MAMF, return the line that says so."""
    from gpuwise.catalog.gpus import get_gpu
    from gpuwise.perf import efficiency as eff
    from gpuwise.store.runs import RunStore

    with RunStore.open(store, create=False) as runs:
        run_id, document = runs.load_document(ref, "bench")
    gpu_id, fraction, dtype = measured_fraction(document, run_id)
    gpu = get_gpu(gpu_id)
    table = eff.mamf(gpu)
    fp8 = fraction * table.fp8 / table.bf16 if table.bf16 else fraction
    source = f"measured by gpuwise bench run {run_id} ({dtype} matmul, best over the sweep)"
    eff.MEASURED_MAMF[gpu_id] = eff.Mamf(fraction, fp8, source, True)
    return (
        f"calibrated: {gpu_id} matmul efficiency {fraction:.0%} of peak measured in bench run {run_id} "
        f"replaces the table's {table.bf16:.0%} ({table.source})"
    )


__all__ = ["apply_calibration", "measured_fraction"]
