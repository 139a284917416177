"""What fits: the largest batch or context on a GPU, and every catalog GPU/count that holds a workload.

A GPU "fits" when the device total (what nvidia-smi would show, context included) stays within
its memory less the requested headroom. Estimates grow monotonically with batch and sequence
length, so the largest value is found by bisection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwise.catalog import GPU, get_gpu, get_model, list_gpus
from gpuwise.errors import GpuwiseError
from gpuwise.memory.estimate import estimate_memory
from gpuwise.workload import Workload
from gpuwise.workload.ml_framework import ml_framework, runs_on
from gpuwise.workload.spec import Sharding

__all__ = [
    "DEFAULT_HEADROOM_PCT",
    "MAX_BATCH",
    "MAX_SEQ",
    "FitResult",
    "FitRow",
    "fit_table",
    "max_batch_that_fits",
    "max_seq_len_that_fits",
]


DEFAULT_HEADROOM_PCT = 10.0
MAX_BATCH = 1 << 16
MAX_SEQ = 1 << 22


def _fits(w: Workload, gpu: GPU, headroom_pct: float) -> bool:
    est = estimate_memory(w, gpu)
    return est.device_total_bytes <= est.gpu_memory_bytes * (1 - headroom_pct / 100.0)


def _largest(lo_ok: int, hi: int, ok) -> int:
    """Largest n in [lo_ok, hi] with ok(n), given ok(lo_ok) (monotone predicate)."""
    if ok(hi):
        return hi
    lo = lo_ok
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _check_headroom(headroom_pct: float) -> None:
    if not 0 <= headroom_pct < 100:
        raise GpuwiseError(f"headroom must be between 0 and 100 percent, got {headroom_pct}")


def max_batch_that_fits(
    workload: Workload, gpu: GPU | None = None, headroom_pct: float = DEFAULT_HEADROOM_PCT
) -> int:
    """Largest per-GPU batch that leaves ``headroom_pct`` of the GPU free (0 if batch 1 does not fit)."""
    _check_headroom(headroom_pct)
    gpu = gpu or get_gpu(workload.gpu)

    def ok(n: int) -> bool:
        return _fits(workload.with_changes(batch_size=n), gpu, headroom_pct)

    if not ok(1):
        return 0
    return _largest(1, MAX_BATCH, ok)


def max_seq_len_that_fits(
    workload: Workload, gpu: GPU | None = None, headroom_pct: float = DEFAULT_HEADROOM_PCT
) -> int:
    """Largest sequence (training) or prompt (inference) length that fits, capped by the model's context."""
    _check_headroom(headroom_pct)
    gpu = gpu or get_gpu(workload.gpu)
    arch = get_model(workload.model)
    cap = arch.max_position_embeddings or MAX_SEQ
    if workload.is_inference:
        cap = max(cap - workload.output_len, 1)

    def ok(n: int) -> bool:
        return _fits(workload.with_changes(seq_len=n), gpu, headroom_pct)

    if not ok(1):
        return 0
    return _largest(1, cap, ok)


@dataclass(frozen=True)
class FitRow:
    """One row of the fit table: a GPU, a GPU count with its sharding and tp/pp, and its device total in
    bytes per GPU against capacity."""

    gpu: str
    gpu_name: str
    num_gpus: int
    sharding: Sharding
    tp: int
    pp: int
    device_total_bytes: float
    gpu_memory_bytes: float
    headroom_pct: float
    peak_phase: str
    assumed: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the row (bytes as integers)."""
        return {
            "gpu": self.gpu,
            "gpu_name": self.gpu_name,
            "num_gpus": self.num_gpus,
            "sharding": self.sharding,
            "tp": self.tp,
            "pp": self.pp,
            "device_total_bytes": int(self.device_total_bytes),
            "gpu_memory_bytes": int(self.gpu_memory_bytes),
            "headroom_pct": round(self.headroom_pct, 2),
            "peak_phase": self.peak_phase,
            "assumed": self.assumed,
        }


@dataclass(frozen=True)
class FitResult:
    """Every (GPU, count) that holds the workload: fewest GPUs first, then the smallest GPU,
    then the most headroom."""

    workload: Workload
    counts: tuple[int, ...]
    rows: list[FitRow]
    checked: int  # (gpu, count) pairs evaluated
    skipped: list[str] = field(default_factory=list)  # counts the workload cannot be split over, and why

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuwise fit --json`` document body: the workload, the GPU counts tried, the rows that fit
        and what was skipped."""
        return {
            "workload": self.workload.to_dict(),
            "counts": list(self.counts),
            "checked": self.checked,
            "rows": [r.to_dict() for r in self.rows],
            "skipped": list(self.skipped),
        }


def _layout(w: Workload, count: int) -> tuple[dict[str, Any], str]:
    """How the workload is spread over ``count`` GPUs: its own layout if it has one, else a stated default."""
    arch = get_model(w.model)
    if count == 1:
        return {"num_gpus": 1, "tp": 1, "pp": 1, "sharding": "none"}, ""
    if w.num_gpus > 1 or w.tp > 1 or w.pp > 1:
        if count % (w.tp * w.pp):
            raise GpuwiseError(f"{count} GPUs is not a multiple of tp × pp = {w.tp * w.pp}")
        return {"num_gpus": count}, ""
    if w.is_training:
        sharding = w.sharding if w.sharding != "none" else "fsdp"
        note = "" if w.sharding != "none" else "FSDP full sharding assumed"
        return {"num_gpus": count, "sharding": sharding}, note
    heads_ok = arch.num_attention_heads % count == 0 and (
        arch.num_kv_heads % count == 0 or count % arch.num_kv_heads == 0
    )
    if heads_ok:
        return {"num_gpus": count, "tp": count}, f"tensor parallel tp={count} assumed"
    if arch.num_layers >= count:
        return {
            "num_gpus": count,
            "pp": count,
        }, f"pipeline parallel pp={count} assumed (heads do not split {count} ways)"
    raise GpuwiseError(f"{arch.id} cannot be split over {count} GPUs")


def fit_table(
    workload: Workload, counts: tuple[int, ...] = (1, 2, 4, 8), min_headroom_pct: float = 0.0
) -> FitResult:
    """Every catalog GPU at each count on which ``workload`` fits with at least ``min_headroom_pct`` free."""
    _check_headroom(min_headroom_pct)
    rows: list[FitRow] = []
    skipped: list[str] = []
    checked = 0
    elsewhere = [g.id for g in list_gpus() if not runs_on(workload.framework, g)]
    for count in counts:
        try:
            changes, note = _layout(workload, count)
            w = workload.with_changes(**changes)
        except GpuwiseError as err:
            skipped.append(f"{count} GPU(s): {err}")
            continue
        for gpu in list_gpus():
            if gpu.id in elsewhere:
                continue  # a TPU for a PyTorch workload, a Gaudi for JAX (workload/ml_framework.py)
            if w.precision == "fp4" and not gpu.fp4_tflops:
                continue  # fp4 needs FP4 tensor cores (estimate_memory refuses it elsewhere)
            checked += 1
            estimate = estimate_memory(w, gpu)
            if estimate.headroom_pct < min_headroom_pct or not estimate.fits:
                continue
            rows.append(
                FitRow(
                    gpu=gpu.id,
                    gpu_name=gpu.name,
                    num_gpus=w.num_gpus,
                    sharding=w.sharding,
                    tp=w.tp,
                    pp=w.pp,
                    device_total_bytes=estimate.device_total_bytes,
                    gpu_memory_bytes=estimate.gpu_memory_bytes,
                    headroom_pct=estimate.headroom_pct,
                    peak_phase=estimate.peak_phase,
                    assumed=note,
                )
            )
    if elsewhere:
        skipped.append(
            f"{', '.join(elsewhere)}: not for a {ml_framework(workload.framework)} workload "
            "(TPUs run JAX/TensorFlow, Gaudi runs PyTorch; --framework picks)"
        )
    if workload.precision == "fp4":
        skipped.append("GPUs without FP4 tensor cores (fp4 is NVFP4/MXFP4: Blackwell, MI355X)")
    rows.sort(key=lambda r: (r.num_gpus, r.gpu_memory_bytes, -r.headroom_pct, r.gpu))
    return FitResult(workload=workload, counts=tuple(counts), rows=rows, checked=checked, skipped=skipped)
