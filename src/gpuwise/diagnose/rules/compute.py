"""Compute rules: fp32 matmuls on 16-bit tensor cores, a batch too small for the GPU, a GPU idle much of
the time, an unfused optimizer step.

Shares are % of the step (or traced span); speed-ups are factors bounded by Amdahl on the share a fix
can shrink, with the tensor-core ratio capped at ``AMP_SPEEDUP_CAP_X``.
"""

from __future__ import annotations

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding, Gain
from gpuwise.diagnose.rules.common import confidence, speedup_from_saving
from gpuwise.units import GiB

__all__ = ["low_utilization", "no_fused_optimizer", "no_mixed_precision", "small_batch"]


def _amp_prescription(dtype: str | None, training: bool) -> tuple[str, str]:
    """(fix, snippet) for what the GPU supports: bf16 autocast, or fp16 with loss scaling (V100, T4) when
    training; without a backward (inference, or unknown) the model simply runs in the 16-bit type."""
    if not training:
        half = "float16" if dtype == "fp16" else "bfloat16"
        return (
            f"Run the model in {'fp16' if dtype == 'fp16' else 'bf16'} (or at least allow TF32 matmuls).",
            "torch.backends.cuda.matmul.allow_tf32 = True\n"
            f'with torch.autocast(device_type="cuda", dtype=torch.{half}):\n'
            "    out = model(batch)",
        )
    if dtype == "fp16":
        return (
            "Train with fp16 autocast and a GradScaler (this GPU has no bf16 or TF32 tensor cores).",
            "scaler = torch.cuda.amp.GradScaler()\n"
            'with torch.autocast(device_type="cuda", dtype=torch.float16):\n'
            "    loss = model(batch)\n"
            "scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()",
        )
    return (
        "Train with bf16 autocast (or at least allow TF32 matmuls).",
        "torch.backends.cuda.matmul.allow_tf32 = True\n"
        'with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n'
        "    loss = model(batch)",
    )


def no_mixed_precision(ev: Evidence) -> Finding | None:
    """Most matmul work runs in fp32 (``fp32_matmul_pct``) without autocast on a GPU whose 16-bit
    tensor cores are ``tensor_core_speedup`` times faster, and Amdahl on the fp32 matmul time says it pays.

    Every kind: training gets autocast with loss scaling, the others "run the model in bf16" (true
    whether or not there is a backward)."""
    share, speedup = ev.precision.fp32_matmul_pct, ev.precision.tensor_core_speedup
    if share is None or share < T.FP32_MATMUL_SHARE_PCT or ev.precision.amp_enabled:
        return None
    if speedup is None or speedup < T.TENSOR_CORE_SPEEDUP_MIN:
        return None
    # Amdahl: only the fp32 matmul time can shrink. A trace measures it; other sources bound it by
    # the busy share times the fp32 share of matmul work.
    time_pct = ev.precision.fp32_matmul_time_pct
    if time_pct is None:
        if ev.source == "trace":
            return None
        busy = (
            100.0 - ev.activity.gpu_idle_pct
            if ev.activity.gpu_idle_pct is not None
            else ev.activity.gpu_util_pct
        )
        time_pct = (100.0 if busy is None else busy) * share / 100
    realistic = min(speedup, T.AMP_SPEEDUP_CAP_X)  # matmuls rarely reach the full peak ratio
    high = speedup_from_saving(time_pct * (1 - 1 / realistic))
    low = speedup_from_saving(time_pct * (1 - 1 / min(realistic, T.AMP_MATMUL_SPEEDUP_LOW_X)))
    if high < T.AMP_MIN_GAIN_X:
        return None
    dtype = ev.precision.tensor_core_dtype or "16-bit"
    fix, snippet = _amp_prescription(ev.precision.tensor_core_dtype, ev.kind == "training")
    return Finding(
        id="no_mixed_precision",
        title="Matmuls run in fp32 on a GPU built for 16-bit",
        severity="high" if high >= T.AMP_HIGH_GAIN_X else "medium",
        confidence=confidence(ev),
        category="compute",
        summary=(
            f"{share:.0f} % of matmul work runs in fp32, {time_pct:.1f} % of the "
            f"{'predicted' if ev.source == 'prediction' else 'measured'} time; "
            f"this GPU's {dtype} tensor cores are {speedup:.0f}× faster at peak."
        ),
        metrics={
            "fp32_matmul_pct": round(share, 2),
            "fp32_matmul_time_pct": round(time_pct, 2),
            "tensor_core_speedup": round(speedup, 2),
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "throughput_x",
            low,
            high,
            f"Amdahl on the fp32 matmul share of time, the matmuls "
            f"{min(realistic, T.AMP_MATMUL_SPEEDUP_LOW_X):g}-{realistic:g}× faster "
            f"(capped at the {T.AMP_SPEEDUP_CAP_X:g}× measured end to end)",
        ),
        source=ev.source,
        tools=("torch.autocast",),
    )


def small_batch(ev: Evidence) -> Finding | None:
    """Half the memory or more is free (``memory_headroom_pct``) while the GPU is under
    ``SMALL_BATCH_GPU_UTIL_PCT`` busy: a larger per-GPU batch fills both.

    Training gets the per-device batch with gradient accumulation divided to keep the global batch;
    inference and serving "more requests per batch"; unknown work (a monitor sample) neutral words that
    hold for both."""
    headroom = ev.memory.memory_headroom_pct
    util = ev.activity.gpu_util_pct
    if util is None and ev.activity.gpu_idle_pct is not None:
        util = 100.0 - ev.activity.gpu_idle_pct
    if headroom is None or util is None:
        return None
    if headroom < T.SMALL_BATCH_HEADROOM_PCT or util >= T.SMALL_BATCH_GPU_UTIL_PCT:
        return None
    predicted = ev.model.larger_batch_speedup_x
    if predicted is not None and predicted < 1 + T.SMALL_BATCH_MIN_PREDICTED_GAIN_PCT / 100:
        return None  # the kernels are already large: the idle comes from elsewhere (input, host, syncs)
    used = ev.memory.memory_peak_bytes or 0
    capacity = ev.memory.memory_capacity_bytes or 0
    target = capacity * (1 - T.TARGET_HEADROOM_PCT / 100)
    factor = max(1.0, target / used) if used else 1.0
    fix, snippet = _small_batch_fix(ev, factor)
    return Finding(
        id="small_batch",
        title="The batch is too small to keep the GPU busy",
        severity="medium",
        confidence=confidence(ev),
        category="compute",
        summary=f"The GPU is {util:.0f} % utilized with {headroom:.0f} % of its memory free "
        f"({used / GiB:.1f} of {capacity / GiB:.1f} GiB used).",
        metrics={
            "gpu_util_pct": round(util, 2),
            "memory_headroom_pct": round(headroom, 2),
            "memory_peak_bytes": used,
            "memory_capacity_bytes": capacity,
            "batch_scale_possible": round(factor, 2),
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "throughput_x",
            1.1,
            min(2.0, 100.0 / max(util, 1.0)),
            "bounded by the idle share; larger batches also amortize launches",
        ),
        source=ev.source,
    )


def _small_batch_fix(ev: Evidence, factor: float) -> tuple[str, str]:
    """(fix, snippet) for the workload kind: keep the global batch when training, batch requests when
    serving a model, and name both when the evidence cannot tell."""
    if ev.kind == "training":
        return (
            f"Raise the per-GPU batch (memory allows up to ~{factor:.1f}× if activations dominate) and "
            "divide gradient accumulation by the same factor to keep the effective batch.",
            "# e.g. per_device_train_batch_size *= 2; gradient_accumulation_steps //= 2  (same global batch)",
        )
    if ev.kind in ("inference", "serving"):
        return (
            f"Batch more inputs per forward (memory allows up to ~{factor:.1f}× if activations dominate): "
            "a larger batch size, or more sequences per batch in the serving engine.",
            "# e.g. batch_size *= 2;  vllm serve MODEL --max-num-seqs 64",
        )
    return (
        f"If this GPU runs one job, give it more work per step: memory allows a ~{factor:.1f}× larger "
        "batch; otherwise share it (a second job, MPS or MIG).",
        "",
    )


def low_utilization(ev: Evidence) -> Finding | None:
    """The GPU computes under ``LOW_UTIL_MODERATE_PCT`` of the time (``gpu_util_pct``, or 100 minus
    ``gpu_idle_pct``); the other findings name where the rest goes. Its words hold for any work, so
    every kind gets it."""
    util = ev.activity.gpu_util_pct
    if util is None and ev.activity.gpu_idle_pct is not None:
        util = 100.0 - ev.activity.gpu_idle_pct
    if util is None or util >= T.LOW_UTIL_MODERATE_PCT:
        return None
    idle = ev.activity.gpu_idle_pct
    high = min(3.0, 100.0 / max(util, 1.0) * 0.8)
    if idle is not None:  # only idle time can be recovered: non-compute work (copies, comm) stays
        high = min(high, speedup_from_saving(idle))
    lead = ev.activity.before_first_kernel_pct
    return Finding(
        id="low_utilization",
        title="The GPU is idle much of the time",
        severity="high" if util < T.LOW_UTIL_HIGH_PCT else "medium",
        confidence=confidence(ev),
        category="compute",
        summary=f"The GPU computes {util:.0f} % of the time"
        + (
            f" ({lead:.0f} % of the step passes on the host before its first kernel)"
            if lead and lead >= T.HOST_BEFORE_FIRST_KERNEL_PCT
            else ""
        )
        + "; the other findings say where the rest goes.",
        metrics={
            "gpu_util_pct": round(util, 2),
            "gpu_idle_pct": idle,
            "before_first_kernel_pct": None if lead is None else round(lead, 2),
        },
        fix=(
            "Fix the causes listed with it (input, host syncs, launches, communication); if none is listed, "
            "profile with `gpuwise profile`."
        ),
        gain=Gain(
            "throughput_x",
            1.0,
            round(max(1.0, high), 3),
            "recovering idle time, rarely all of it",
        ),
        source=ev.source,
    )


def no_fused_optimizer(ev: Evidence) -> Finding | None:
    """AdamW runs unfused (``optimizer_fused`` False) and the optimizer phase takes at least
    ``OPTIMIZER_STEP_SHARE_PCT`` of the step. Training only: nothing else has an optimizer."""
    share = ev.steps.phase_pct("optimizer")
    if ev.model.optimizer_fused is not False or share is None or share < T.OPTIMIZER_STEP_SHARE_PCT:
        return None
    return Finding(
        id="no_fused_optimizer",
        title="The optimizer step runs unfused",
        severity="low",
        confidence=confidence(ev),
        category="compute",
        summary=(
            f"The AdamW update takes {share:.0f} % of the step with one kernel per parameter group "
            "(fused=False)."
        ),
        metrics={"optimizer_step_pct": round(share, 2)},
        fix="Use the fused AdamW kernel: same math, one launch for all parameters.",
        fix_snippet=(
            "torch.optim.AdamW(model.parameters(), lr=..., fused=True)\n# Hugging Face: "
            'TrainingArguments(optim="adamw_torch_fused")'
        ),
        gain=Gain(
            "step_time_pct",
            0.0,
            round(share / 2, 2),
            "at most half of the optimizer phase; the update stays bandwidth-bound",
        ),
        source=ev.source,
    )
