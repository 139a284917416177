"""Whether and how to use several GPUs: strategy, GPU count, and whether NVLink matters.

Every option is evaluated by the models (memory per GPU, speed of the whole job). The
decision takes the smallest GPU count that fits (or the user's, if larger), then the
simplest strategy within `PLAN_SIMPLER_STRATEGY_TOLERANCE_PCT` of the best for the goal.
NVLink's worth is computed: the same option on the same GPU with its NVLink removed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gpuwise.catalog import GPU, ModelArch, get_gpu, get_model
from gpuwise.diagnose import thresholds as T
from gpuwise.errors import GpuwiseError
from gpuwise.plan.candidates import divisors
from gpuwise.plan.goal import comfortable, goal_value
from gpuwise.plan.types import NvlinkVerdict, Outcome, ScaleOption, ScalingDecision
from gpuwise.workload import Workload
from gpuwise.workload.spec import Goal

__all__ = [
    "NODE_GPUS",
    "EvaluateOn",
    "adopt",
    "decide",
    "global_batch_note",
    "keep_global_batch",
    "label_of",
    "layouts",
    "strategy_of",
]

EvaluateOn = Callable[[Workload, GPU], Outcome]

NODE_GPUS = 8  # GPUs per NVLink domain on HGX/DGX servers (NVIDIA DGX H100/A100 user guides)
_MAX_GPUS = 1024
_SIMPLICITY = {
    "single": 0,
    "replicas": 0,
    "ddp": 1,
    "zero1": 2,
    "zero2": 3,
    "zero3": 4,
    "fsdp": 4,
    "tp": 5,
    "fsdp+tp": 6,
    "tp+pp": 7,
    "fsdp+tp+pp": 8,
}


def strategy_of(w: Workload) -> str:
    """Short key of the layout: single, replicas, ddp, zero2, fsdp, tp, fsdp+tp, tp+pp, ..."""
    if w.num_gpus == 1:
        return "single"
    parts = []
    if w.is_training and w.data_parallel > 1:
        parts.append({"none": "ddp"}.get(w.sharding, w.sharding))
    parts += ["tp"] * (w.tp > 1) + ["pp"] * (w.pp > 1)
    if len(parts) > 1 and parts[0] == "ddp":
        parts = parts[1:]
    return "+".join(parts) or "replicas"


def label_of(w: Workload) -> str:
    """Human name of the parallel layout: 'FSDP (ZeRO-3) on 8 GPUs', 'TP4 + PP2 on 8 GPUs', ..."""
    if w.num_gpus == 1:
        return "single GPU"
    names = {
        "none": "DDP",
        "ddp": "DDP",
        "zero1": "ZeRO-1",
        "zero2": "ZeRO-2",
        "zero3": "ZeRO-3",
        "fsdp": "FSDP (ZeRO-3)",
    }
    parts = []
    if w.is_training and w.data_parallel > 1:
        parts.append(names[w.sharding] + (f" ×{w.data_parallel}" if (w.tp > 1 or w.pp > 1) else ""))
    if w.tp > 1:
        parts.append(f"TP{w.tp}")
    if w.pp > 1:
        parts.append(f"PP{w.pp}")
    if not parts:
        parts.append(f"{w.num_gpus} independent replicas")
    return " + ".join(parts) + f" on {w.num_gpus} GPUs"


def _tp_sizes(arch: ModelArch, limit: int) -> list[int]:
    sizes = [t for t in (2, 4, 8) if t <= limit]
    if not arch.is_transformer:
        return []
    return [
        t
        for t in sizes
        if arch.num_attention_heads % t == 0 and (arch.num_kv_heads % t == 0 or t % arch.num_kv_heads == 0)
    ]


def layouts(w: Workload, n: int) -> list[Workload]:
    """Parallel layouts of `w` on n GPUs worth evaluating (invalid ones are skipped)."""
    arch = get_model(w.model)
    tries: list[dict] = []
    if n == 1:
        tries.append({"num_gpus": 1, "tp": 1, "pp": 1, "sharding": "none"})
    elif w.is_training:
        for sharding in ("ddp", "zero2", "fsdp"):
            tries.append({"num_gpus": n, "tp": 1, "pp": 1, "sharding": sharding})
        for tp in _tp_sizes(arch, min(n, NODE_GPUS)):
            tries.append({"num_gpus": n, "tp": tp, "pp": 1, "sharding": "fsdp" if n > tp else "none"})
        if n > NODE_GPUS and _tp_sizes(arch, NODE_GPUS):
            tp = _tp_sizes(arch, NODE_GPUS)[-1]
            for pp in (2, 4, 8, 16):
                if n % (tp * pp) == 0 and pp <= arch.num_layers:
                    tries.append(
                        {"num_gpus": n, "tp": tp, "pp": pp, "sharding": "fsdp" if n > tp * pp else "none"}
                    )
    else:  # inference: n GPUs as n/tp replicas of a tp-way model
        for tp in [1, *_tp_sizes(arch, min(n, NODE_GPUS))]:
            if n % tp == 0:
                tries.append({"num_gpus": n, "tp": tp, "pp": 1})
        if n > NODE_GPUS and _tp_sizes(arch, NODE_GPUS):
            tp = _tp_sizes(arch, NODE_GPUS)[-1]
            if n % tp == 0 and n // tp <= arch.num_layers:
                tries.append({"num_gpus": n, "tp": tp, "pp": n // tp})
    out = []
    for changes in tries:
        try:
            out.append(w.with_changes(**keep_global_batch(w, changes)))
        except GpuwiseError:
            continue
    return out


def keep_global_batch(w: Workload, changes: dict) -> dict:
    """`changes` (a layout) plus the micro-batch and accumulation that keep `w`'s global batch there.

    Fewer data-parallel replicas take more accumulation steps (and a pipeline fills its bubble with
    them); when the global batch does not split over the replicas, the closest one that does is used
    and `global_batch_note` says why."""
    if not w.is_training:
        return changes
    dp = changes.get("num_gpus", w.num_gpus) // (changes.get("tp", w.tp) * changes.get("pp", w.pp))
    per_replica = max(1, round(w.global_batch / max(dp, 1)))
    batch = max((d for d in divisors(per_replica) if d <= w.batch_size), default=1)
    return {**changes, "batch_size": batch, "grad_accum": per_replica // batch}


def global_batch_note(w: Workload, layout: Workload) -> str:
    """Why `layout` runs another global batch than `w` ('' when it keeps it)."""
    if not w.is_training or layout.global_batch == w.global_batch:
        return ""
    dp = layout.data_parallel
    why = (
        f"its {dp} data-parallel replicas need at least one sequence each"
        if dp > w.global_batch
        else f"{w.global_batch} sequences do not split evenly over {dp} data-parallel replicas"
    )
    return (
        f"{label_of(layout)} cannot keep the global batch of {w.global_batch}: {why}, so it runs "
        f"{layout.global_batch} per optimizer step (micro-batch {layout.batch_size} × {layout.grad_accum} "
        "accumulation per replica): re-tune the learning rate and warm-up for it."
    )


def _option(w: Workload, outcome: Outcome) -> ScaleOption:
    return ScaleOption(
        label=label_of(w),
        strategy=strategy_of(w),
        num_gpus=w.num_gpus,
        tp=w.tp,
        pp=w.pp,
        sharding=w.sharding,
        outcome=outcome,
    )


def _value(o: ScaleOption, goal: Goal, w: Workload) -> float:
    value = goal_value(o.outcome, goal, w)
    if goal == "throughput" and w.is_inference and o.outcome.throughput:
        return o.outcome.throughput / o.num_gpus  # serving scales out by replicas: per-GPU speed decides
    return value


def _same_layout(o: ScaleOption, w: Workload) -> bool:
    return (o.num_gpus, o.tp, o.pp, o.sharding) == (w.num_gpus, w.tp, w.pp, w.sharding)


def _choose(options: list[ScaleOption], goal: Goal, w: Workload) -> ScaleOption:
    """Best for the goal, but the workload's own layout, or else the simplest, within the tolerance of it."""
    best = max(options, key=lambda o: _value(o, goal, w))
    best_value = _value(best, goal, w)
    tolerance = T.PLAN_SIMPLER_STRATEGY_TOLERANCE_PCT / 100 * abs(best_value)
    near = [o for o in options if _value(o, goal, w) >= best_value - tolerance]
    return min(
        near, key=lambda o: (not _same_layout(o, w), _SIMPLICITY.get(o.strategy, 9), -_value(o, goal, w))
    )


def _counts(w: Workload) -> list[int]:
    counts = {1, 2, 4, 8, w.num_gpus}
    return sorted(c for c in counts if c <= max(NODE_GPUS, w.num_gpus))


def decide(workload: Workload, goal: Goal, evaluate_on: EvaluateOn) -> ScalingDecision:
    """The scaling decision for `workload` (already carrying the recommended single-GPU edits)."""
    gpu = get_gpu(workload.gpu)
    counts, evaluated = _evaluate_counts(workload, gpu, evaluate_on)
    every = [o for c in counts for o in evaluated[c]]
    fitting = [o for o in every if comfortable(o.outcome)]
    if not fitting:
        return _none_fits(gpu, counts[-1], every)
    min_count = min(o.num_gpus for o in fitting)
    count = max(min_count, workload.num_gpus)
    at_count = [o for o in fitting if o.num_gpus == count] or [o for o in fitting if o.num_gpus == min_count]
    chosen = _choose(at_count, goal, workload)
    reason = _reason(workload, chosen, min_count, count, gpu)
    nvlink, nvlink_reason, slowdown = _nvlink(workload, chosen, gpu, evaluate_on)
    return ScalingDecision(
        strategy=chosen.label,
        num_gpus=chosen.num_gpus,
        tp=chosen.tp,
        pp=chosen.pp,
        sharding=chosen.sharding,
        reason=reason,
        nvlink=nvlink,
        nvlink_reason=nvlink_reason,
        nvlink_slowdown_pct=slowdown,
        options=_shown(workload, goal, counts, evaluated, every),
        global_batch_note=global_batch_note(workload, adopt(workload, chosen)),
    )


def _evaluate_counts(
    workload: Workload, gpu: GPU, evaluate_on: EvaluateOn
) -> tuple[list[int], dict[int, list[ScaleOption]]]:
    """GPU counts tried (1, 2, 4, 8, the user's; doubling past a node until a layout fits, up to
    `_MAX_GPUS`) and every layout's option at each count."""
    evaluated: dict[int, list[ScaleOption]] = {}
    counts = _counts(workload)
    n = counts[-1]
    while n < _MAX_GPUS and not any(
        comfortable(o.outcome)
        for c in counts
        for o in evaluated.setdefault(c, _eval(workload, c, gpu, evaluate_on))
    ):
        n *= 2
        counts.append(n)
    for c in counts:
        evaluated.setdefault(c, _eval(workload, c, gpu, evaluate_on))
    return counts, evaluated


def _none_fits(gpu: GPU, largest_count: int, every: list[ScaleOption]) -> ScalingDecision:
    """The decision when no layout up to `largest_count` GPUs fits: the fit section says what would."""
    return ScalingDecision(
        strategy="none fits",
        num_gpus=0,
        tp=1,
        pp=1,
        sharding="none",
        reason=(
            f"No layout of up to {largest_count} × {gpu.id} fits this workload; see the fit section for "
            "what would."
        ),
        nvlink="n/a",
        nvlink_reason="",
        nvlink_slowdown_pct=None,
        options=tuple(every),
    )


def _shown(
    workload: Workload,
    goal: Goal,
    counts: list[int],
    evaluated: dict[int, list[ScaleOption]],
    every: list[ScaleOption],
) -> tuple[ScaleOption, ...]:
    """Every option by GPU count then simplicity, the goal's best at each count marked."""
    best_ids = set()
    for c in counts:
        here = [o for o in evaluated[c] if comfortable(o.outcome)]
        if here:
            best_ids.add(id(_choose(here, goal, workload)))
    return tuple(
        sorted(
            (replace(o, best_at_count=id(o) in best_ids) for o in every),
            key=lambda o: (o.num_gpus, _SIMPLICITY.get(o.strategy, 9)),
        )
    )


def adopt(w: Workload, option: ScaleOption | ScalingDecision) -> Workload:
    """`w` on the option's layout, keeping its global batch where the layout allows."""
    changes: dict = {"num_gpus": option.num_gpus, "tp": option.tp, "pp": option.pp}
    if w.is_training:
        changes["sharding"] = option.sharding
    return w.with_changes(**keep_global_batch(w, changes))


def _eval(w: Workload, n: int, gpu: GPU, evaluate_on: EvaluateOn) -> list[ScaleOption]:
    return [_option(layout, evaluate_on(layout, gpu)) for layout in layouts(w, n)]


def _reason(w: Workload, chosen: ScaleOption, min_count: int, count: int, gpu: GPU) -> str:
    peak = chosen.outcome.peak_bytes / 2**30
    if chosen.num_gpus == 1:
        text = f"It fits one {gpu.id} ({peak:.1f} GiB per GPU, {chosen.outcome.headroom_pct:.0f} % free)"
        if w.is_inference:
            return (
                text
                + "; add replicas (one per GPU) for more requests per second rather than splitting the model."
            )
        return text + (
            "; more GPUs with DDP multiply throughput (see the options) without changing the memory per GPU."
        )
    if min_count > 1 and count == min_count:
        return (
            f"It needs at least {min_count} × {gpu.id}: {chosen.label} holds {peak:.1f} GiB per GPU "
            f"({chosen.outcome.headroom_pct:.0f} % free)."
        )
    return (
        f"On {count} GPUs, {chosen.label} is the simplest layout within "
        f"{T.PLAN_SIMPLER_STRATEGY_TOLERANCE_PCT:.0f} % of the best for the goal ({peak:.1f} GiB per GPU)."
    )


def _nvlink(
    w: Workload, chosen: ScaleOption, gpu: GPU, evaluate_on: EvaluateOn
) -> tuple[NvlinkVerdict, str, float | None]:
    if chosen.num_gpus == 1 or (chosen.strategy == "replicas"):
        return "not-needed", "One GPU per model copy: no collective communication.", None
    layout = adopt(w, chosen)
    with_link = chosen.outcome
    if gpu.nvlink_gbps > 0:
        without = evaluate_on(layout, replace(gpu, nvlink_gbps=0.0))
        slowdown = _slowdown_pct(with_link, without, w)
        basis = (
            f"predicted {slowdown:+.0f} % {'per-token latency' if w.is_inference else 'step time'} over PCIe "
            f"Gen{gpu.pcie_gen or 4} instead of {gpu.nvlink_gbps:.0f} GB/s NVLink"
        )
    else:
        exposed = with_link.comm_exposed_pct or 0.0
        slowdown = 100.0 * exposed / max(1.0, 100.0 - exposed)
        basis = (
            f"{gpu.id} has no NVLink: {exposed:.0f} % of each step is exposed communication over PCIe "
            f"(up to {slowdown:.0f} % faster with NVLink-class links)"
        )
    verdict: NvlinkVerdict
    if slowdown >= T.NVLINK_REQUIRED_SLOWDOWN_PCT:
        verdict = "required"
    elif slowdown >= T.NVLINK_RECOMMENDED_SLOWDOWN_PCT:
        verdict = "recommended"
    else:
        verdict = "not-needed"
    if chosen.num_gpus > NODE_GPUS:
        basis += "; across nodes the network (InfiniBand/RoCE) carries the data-parallel traffic"
    return verdict, basis + ".", round(slowdown, 2)


def _slowdown_pct(with_link: Outcome, without: Outcome, w: Workload) -> float:
    if w.is_inference and with_link.tpot_ms and without.tpot_ms:
        return 100.0 * (without.tpot_ms / with_link.tpot_ms - 1)
    if with_link.throughput and without.throughput:
        return 100.0 * (with_link.throughput / without.throughput - 1)
    return 0.0
