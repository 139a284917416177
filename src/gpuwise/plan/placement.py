"""Where the workload fits, and if nowhere, what would make it fit — computed, not guessed.

Each remedy (quantization, LoRA/QLoRA, memory savers, sharding or tensor parallelism over
more GPUs) is applied to the workload and placed on the smallest catalog GPU where the
memory model says it fits comfortably.
"""

from __future__ import annotations

from typing import Any

from gpuwise.catalog import GPU, get_gpu, list_gpus
from gpuwise.errors import GpuwiseError
from gpuwise.plan.candidates import Evaluate
from gpuwise.plan.goal import comfortable
from gpuwise.plan.hardware import as_given as hw_as_given
from gpuwise.plan.hardware import port
from gpuwise.plan.scaling import NODE_GPUS, label_of, layouts
from gpuwise.plan.techniques import Step
from gpuwise.plan.types import FitOption, FitReport, Outcome
from gpuwise.units import GiB
from gpuwise.workload import Workload

__all__ = ["fit_report", "longest_sequence", "remedies"]

_MAX_NODES = 64  # more GPUs are tried up to this many 8-GPU nodes


def remedies(w: Workload) -> list[tuple[str, dict[str, Any]]]:
    """Single-GPU-count remedies to try, most conservative first."""
    out: list[tuple[str, dict[str, Any]]] = []
    if w.is_inference and not w.is_cv:
        if w.precision in {"fp32", "bf16", "fp16", "amp-bf16", "amp-fp16"}:
            out.append(("8-bit weights", {"precision": "int8"}))
        out.append(("4-bit weights + FP8 KV cache", {"precision": "int4", "kv_cache_dtype": "fp8"}))
    if w.is_training:
        saver = {"grad_checkpointing": "full"}
        if w.optimizer in {"adamw", "adamw-fused"}:
            saver["optimizer"] = "paged-adamw-8bit" if w.task == "qlora" else "adamw-8bit"
        out.append(("checkpointing + 8-bit optimizer", saver))
        if w.task in {"full-finetune"}:
            out.append(
                (
                    "LoRA (bf16 base) + checkpointing",
                    {"task": "lora", "precision": "bf16", "grad_checkpointing": "full"},
                )
            )
        if w.task in {"full-finetune", "lora"}:
            out.append(
                (
                    "QLoRA (NF4 base) + checkpointing",
                    {"task": "qlora", "precision": "nf4", "double_quant": True, "grad_checkpointing": "full"},
                )
            )
        if w.batch_size > 1:
            total = w.batch_size * w.grad_accum
            out.append(
                (
                    f"micro-batch 1 × {total} accumulation + checkpointing",
                    {"batch_size": 1, "grad_accum": total, "grad_checkpointing": "full"},
                )
            )
    return out


def _smallest_fit(w: Workload, evaluate: Evaluate, gpus: list[GPU]) -> tuple[GPU, Workload, Outcome] | None:
    for gpu in gpus:
        moved = port(w, gpu)
        if moved is None:
            continue
        outcome = evaluate(moved)
        if comfortable(outcome):
            return gpu, moved, outcome
    return None


def _scaled_fit(
    w: Workload, evaluate: Evaluate, gpus: list[GPU]
) -> tuple[str, GPU, Workload, Outcome] | None:
    """More GPUs: sharding (training) or tensor/pipeline parallelism (inference), smallest count first."""
    n = w.num_gpus * 2
    # No layout on n GPUs holds less than 1/n of one GPU's peak: skip the counts that cannot fit anywhere.
    largest = max((g.memory_gb * GiB for g in gpus), default=0.0)
    while n <= NODE_GPUS * _MAX_NODES and evaluate(w).peak_bytes * w.num_gpus / n > largest:
        n *= 2
    while n <= NODE_GPUS * _MAX_NODES:
        best = None
        for gpu in gpus:
            moved = port(w, gpu)
            if moved is None:
                continue
            for layout in layouts(moved, n):
                outcome = evaluate(layout)
                if comfortable(outcome):
                    best = (gpu, layout, outcome)
                    break
            if best:
                break
        if best:
            return label_of(best[1]), *best
        n *= 2
    return None


def longest_sequence(w: Workload, evaluate: Evaluate, floor: int = 256) -> int | None:
    """Longest seq_len (prompt for inference) that fits comfortably, by bisection on the memory model."""
    lo, hi = floor, w.seq_len
    try:
        if not comfortable(evaluate(w.with_changes(seq_len=lo))):
            return None
    except GpuwiseError:
        return None
    while hi - lo > max(16, lo // 64):
        mid = (lo + hi) // 2
        if comfortable(evaluate(w.with_changes(seq_len=mid))):
            lo = mid
        else:
            hi = mid
    return lo


def _context_option(original: Workload, local_steps: list[Step], evaluate: Evaluate) -> FitOption | None:
    """On the user's own GPU: the longest sequence that fits with the memory edits tried there."""
    base = local_steps[-1].after_workload if local_steps else original
    longest = longest_sequence(base, evaluate)
    if longest is None or longest >= original.seq_len:
        return None
    changes = {k: v for s in local_steps for k, v in s.candidate.changes.items() if getattr(original, k) != v}
    edits = ", ".join(f"{k}={v}" for k, v in changes.items())
    what = "prompt" if original.is_inference else "sequence"
    label = f"{what} of at most {longest:,} tokens (not {original.seq_len:,})" + (
        f", with {edits}" if edits else ""
    )
    changes["seq_len"] = longest
    return FitOption(
        label, changes, original.gpu, original.num_gpus, evaluate(base.with_changes(seq_len=longest))
    )


def fit_report(
    original: Workload,
    current: Outcome,
    fit_steps: list[Step],
    evaluate: Evaluate,
    local_steps: list[Step] | None = None,
) -> FitReport:
    """Does `original` fit comfortably where it is, on which catalog GPUs it fits as given, and
    otherwise the computed ways to make it fit (`fit_steps`: the plan's own fit edits on the user's
    GPU; `local_steps`: every edit tried there, for the longest sequence that fits)."""
    gpu = get_gpu(original.gpu)
    need = current.peak_bytes / GiB
    have = current.capacity_bytes / GiB
    if comfortable(current):
        return FitReport(
            True,
            True,
            f"Fits on {original.num_gpus} × {gpu.id}: {need:.1f} GiB of {have:.1f} GiB per GPU "
            f"({current.headroom_pct:.0f} % free).",
        )
    as_given = hw_as_given(original, evaluate)
    fits_here = [gid for gid, o in as_given.items() if comfortable(o)]
    options = _local_options(original, fit_steps, evaluate, local_steps or [], gpu.id)
    head = _head(original, current, gpu.id)
    gpus = sorted(list_gpus(), key=lambda g: (g.memory_gb, g.cloud_usd_per_hr or float("inf")))
    if fits_here:
        names = ", ".join(sorted(fits_here, key=lambda g: get_gpu(g).memory_gb)[:5])
        return FitReport(False, True, f"{head}. As given it fits on: {names}.", tuple(options))
    # Fits nowhere as given: compute what would make it fit.
    options += _remedy_options(original, evaluate, gpus)
    largest = max(as_given.values(), key=lambda o: o.capacity_bytes, default=None)
    tail = ""
    if largest is not None:
        tail = (
            f" (largest: {largest.gpu}, {largest.peak_bytes / GiB:.1f} GiB needed of "
            f"{largest.capacity_bytes / GiB:.1f} GiB)"
        )
    message = f"{head}. It fits on no catalog GPU at {original.num_gpus} GPU(s) as given{tail}. " + (
        f"{len(options)} computed way(s) to make it fit follow."
        if options
        else "Nothing tried makes it fit: reduce the sequence length or batch, or use a smaller model."
    )
    return FitReport(False, False, message, tuple(options))


def _local_options(
    original: Workload, fit_steps: list[Step], evaluate: Evaluate, local_steps: list[Step], gpu_id: str
) -> list[FitOption]:
    """On the user's GPU: the plan's fit edits when they make it fit, else a shorter sequence (LLMs)."""
    options: list[FitOption] = []
    if fit_steps and comfortable(fit_steps[-1].after):
        last = fit_steps[-1]
        changes = {k: v for s in fit_steps for k, v in s.candidate.changes.items()}
        label = " + ".join(s.candidate.title for s in fit_steps)
        options.append(FitOption(label, changes, gpu_id, original.num_gpus, last.after))
    if not options and not original.is_cv:
        context = _context_option(original, local_steps, evaluate)
        if context is not None:
            options.append(context)
    return options


def _head(original: Workload, current: Outcome, gpu_id: str) -> str:
    """First sentence of an uncomfortable fit: tight (fits, too little headroom) or does not fit, in GiB."""
    need = current.peak_bytes / GiB
    have = current.capacity_bytes / GiB
    if current.fits:  # fits, but not comfortably (the caller returned on comfortable)
        return (
            f"Tight on {original.num_gpus} × {gpu_id}: {need:.1f} GiB of {have:.1f} GiB per GPU "
            f"({current.headroom_pct:.0f} % free, "
            "out-of-memory risk)"
        )
    return (
        f"Does not fit on {original.num_gpus} × {gpu_id}: needs {need:.1f} GiB per GPU, {have:.1f} GiB "
        "available"
    )


def _remedy_options(original: Workload, evaluate: Evaluate, gpus: list[GPU]) -> list[FitOption]:
    """Each remedy on the smallest GPU where it fits, then more GPUs (sharding or TP/PP)."""
    options: list[FitOption] = []
    for label, changes in remedies(original):
        try:
            edited = original.with_changes(**changes)
        except GpuwiseError:
            continue
        found = _smallest_fit(edited, evaluate, gpus)
        if found:
            g, moved, outcome = found
            options.append(FitOption(label, changes, g.id, moved.num_gpus, outcome))
    scaled = _scaled_fit(original, evaluate, gpus)
    if scaled:
        label, g, layout, outcome = scaled
        changes = {"num_gpus": layout.num_gpus, "tp": layout.tp, "pp": layout.pp}
        if layout.is_training:
            changes["sharding"] = layout.sharding
        options.append(FitOption(f"more GPUs: {label}", changes, g.id, layout.num_gpus, outcome))
    return options
