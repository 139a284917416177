"""Techniques with computed impact, and the recommended combination.

Every number here comes from re-running the memory and performance models on the edited
workload (`evaluate`). The combination is greedy and explainable: first make the job fit
(lowest quality risk first), then take the edit that helps the goal most, until nothing
helps by at least `thresholds.PLAN_MIN_GAIN_PCT`. Lossy edits (int4, fp8 training, a
changed global batch) need `PLAN_LOSSY_MIN_GAIN_PCT`; switching to LoRA/QLoRA is only
ever done to make a job fit, because it changes what is trained.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.finding import FindingId
from gpuwise.errors import GpuwiseError
from gpuwise.plan import knowledge as K
from gpuwise.plan.candidates import Candidate, Evaluate, candidates
from gpuwise.plan.goal import comfortable, goal_metric_name, gpu_seconds_per_unit, relative_gain_pct
from gpuwise.plan.types import (
    EFFORTS,
    QUALITY_RISKS,
    Effort,
    Impact,
    Outcome,
    QualityRisk,
    Technique,
    Verdict,
)
from gpuwise.units import GiB
from gpuwise.workload import Workload
from gpuwise.workload.spec import Goal

__all__ = [
    "ADDRESSES",
    "RISK_ORDER",
    "Step",
    "apply",
    "assess",
    "describe",
    "expected_gain_pct",
    "impact",
    "rank_by_gain",
    "recommend",
]

RISK_ORDER: dict[QualityRisk, int] = {risk: i for i, risk in enumerate(QUALITY_RISKS)}
_LOSSY: frozenset[QualityRisk] = frozenset({"medium", "changes-training", "changes-task"})
_FIT_ONLY = {"lora", "qlora"}  # they change what is trained: never applied just for speed
_MAX_STEPS = 8
# Findings whose cause the performance model does not see (it assumes a fed, busy GPU and does not
# separate fused from unfused optimizer kernels): an edit they point to may help beyond the prediction.
_OUTSIDE_THE_MODEL: frozenset[FindingId] = frozenset({"small_batch", "low_utilization", "no_fused_optimizer"})
# Which findings a technique addresses (finding ids from gpuwise.diagnose.rules).
ADDRESSES: dict[str, tuple[FindingId, ...]] = {
    "mixed_precision": ("no_mixed_precision",),
    "fp8_training": ("no_mixed_precision",),
    "bf16_weights": ("oom_risk",),
    "flash_attention": ("no_flash_attention", "oom_risk"),
    "fused_optimizer": ("no_fused_optimizer",),
    "optimizer_8bit": ("oom_risk",),
    "grad_checkpointing": ("oom_risk",),
    "smaller_batch": ("oom_risk",),
    "bigger_batch": ("small_batch", "low_utilization"),
    "lora": ("oom_risk",),
    "qlora": ("oom_risk",),
    "sharding": ("oom_risk",),
    "weight_fp8": ("decode_memory_bound", "oom_risk"),
    "weight_int8": ("decode_memory_bound", "oom_risk"),
    "weight_int4": ("decode_memory_bound", "oom_risk"),
    "kv_fp8": ("kv_cache_dominant", "oom_risk"),
    "more_concurrency": ("decode_memory_bound",),
    "parallel_layout": ("oom_risk",),
    "offload": ("oom_risk",),
}


@dataclass(frozen=True)
class Step:
    """One applied edit of the recommended combination."""

    candidate: Candidate
    before_workload: Workload
    after_workload: Workload
    before: Outcome
    after: Outcome
    purpose: Literal["hardware", "fit", "goal"]  # the GPU requires it, made the job fit, or served the goal


def apply(workload: Workload, cand: Candidate) -> Workload | None:
    """`workload` with the candidate's changes, None when that combination is not valid."""
    try:
        return workload.with_changes(**cand.changes)
    except GpuwiseError:
        return None  # not a valid combination for this model/GPU (validation says why)


def impact(before: Outcome, after: Outcome) -> Impact:
    """What changing `before` into `after` does: step time, latency and cost changes (%),
    throughput ×, memory saved (bytes per GPU), whether it makes the job fit; speed only when both fit."""

    def pct(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else round(100.0 * (a / b - 1.0), 2)

    throughput_x = latency = None
    both = before.fits and after.fits  # speed of a job that does not fit is not a number to compare
    if both and before.throughput and after.throughput:
        throughput_x = round(after.throughput / before.throughput, 4)
    if both and before.tpot_ms is not None and after.tpot_ms is not None:
        latency = pct(after.tpot_ms, before.tpot_ms)
    elif throughput_x is not None:
        latency = round(100.0 * (1 / throughput_x - 1), 2)
    if before.usd_per_1m is not None and after.usd_per_1m is not None:
        cost = pct(after.usd_per_1m, before.usd_per_1m)
    else:
        cost = pct(gpu_seconds_per_unit(after), gpu_seconds_per_unit(before))
    step = pct(after.step_time_s, before.step_time_s) if before.fits and after.fits else None
    return Impact(
        step_time_pct=step,
        throughput_x=throughput_x,
        latency_pct=latency,
        memory_saved_bytes=int(before.peak_bytes - after.peak_bytes),
        cost_pct=cost if before.fits and after.fits else None,
        makes_it_fit=not comfortable(before) and comfortable(after),
    )


def describe(imp: Impact, after: Outcome) -> str:
    """The numbers of an impact, for reasons and tables: '1.42× tokens/s, −3.1 GiB, −30 % $/1M'."""
    parts = []
    if imp.makes_it_fit:
        parts.append(f"fits ({after.headroom_pct:.0f} % free)")
    if imp.throughput_x is not None and abs(imp.throughput_x - 1) >= T.IMPACT_MIN_THROUGHPUT_CHANGE_X:
        parts.append(f"{imp.throughput_x:.2f}× {after.throughput_unit}")
    if (
        imp.latency_pct is not None
        and after.tpot_ms is not None
        and abs(imp.latency_pct) >= T.IMPACT_MIN_CHANGE_PCT
    ):
        parts.append(f"{imp.latency_pct:+.0f} % per-token latency")
    if abs(imp.memory_saved_bytes) >= T.IMPACT_MIN_MEMORY_GIB * GiB:
        parts.append(f"{-imp.memory_saved_bytes / GiB:+.1f} GiB")
    if imp.cost_pct is not None and abs(imp.cost_pct) >= T.IMPACT_MIN_CHANGE_PCT:
        parts.append(f"{imp.cost_pct:+.0f} % cost")
    return ", ".join(parts) or "no measurable change"


def _allowed_for_goal(cand: Candidate, gain: float) -> bool:
    if cand.id in _FIT_ONLY:
        return False
    if cand.quality_risk in _LOSSY:
        return gain >= T.PLAN_LOSSY_MIN_GAIN_PCT
    return gain >= T.PLAN_MIN_GAIN_PCT


def _fit_steps(workload: Workload, goal: Goal, evaluate: Evaluate) -> list[Step]:
    """Memory edits until the job fits comfortably, allowing more quality risk only when less is not enough.

    Tier by tier (none, low, changes-training, medium): greedily take an edit that fits alone (best
    speed), else the edit that saves the most, until it fits. The first tier that fits wins; if none
    does, the last tier's path (the most memory saved) is returned so callers can show how close it got.
    """
    if comfortable(evaluate(workload)):
        return []
    path: list[Step] = []
    for tier in sorted(set(RISK_ORDER.values())):
        if tier == RISK_ORDER["changes-training"]:  # before any lossy edit: split the model on these GPUs
            via_layout = _layout_fit(workload, path, evaluate)
            if via_layout:
                return _prune(workload, via_layout, evaluate)
        path = _greedy_fit(workload, evaluate, max_risk=tier)
        if path and comfortable(path[-1].after):
            return _prune(workload, path, evaluate)
    return path


def _layout_fit(workload: Workload, path: list[Step], evaluate: Evaluate) -> list[Step] | None:
    """Another parallel layout on the user's own GPU count (TP inside the node, PP across): no quality
    risk, so it is tried before a lossy edit (bf16 weights without fp32 master copies, ...)."""
    from gpuwise.plan.scaling import label_of, layouts  # scaling imports candidates, as this module does

    if not workload.is_training or workload.num_gpus < 2:
        return None
    w = path[-1].after_workload if path else workload
    tried = [
        (x, evaluate(x))
        for x in layouts(w, w.num_gpus)
        if (x.tp, x.pp, x.sharding) != (w.tp, w.pp, w.sharding)
    ]
    fitting = [t for t in tried if comfortable(t[1])]
    if not fitting:
        return None
    best, after = max(fitting, key=lambda t: t[1].throughput or 0.0)
    changes = {k: getattr(best, k) for k in ("tp", "pp", "sharding") if getattr(best, k) != getattr(w, k)}
    # micro-batch and accumulation always travel together with the layout: pruning may replay this edit
    # on a path without an earlier micro-batch change, and a lone accumulation would change the global
    # batch (issue 28: 70B on 64 H100 went from 2,048 to 4,096 sequences per step)
    changes |= {"batch_size": best.batch_size, "grad_accum": best.grad_accum}
    cand = Candidate(
        "parallel_layout", f"Split the model: {label_of(best)}", changes, "none", saves_memory=True
    )
    return [*path, Step(cand, w, best, evaluate(w), after, "fit")]


def _greedy_fit(workload: Workload, evaluate: Evaluate, max_risk: int) -> list[Step]:
    steps: list[Step] = []
    w = workload
    for _ in range(_MAX_STEPS):
        before = evaluate(w)
        if comfortable(before):
            break
        tried = []
        for cand in candidates(w, evaluate):
            if not cand.saves_memory or RISK_ORDER[cand.quality_risk] > max_risk:
                continue
            edited = apply(w, cand)
            if edited is not None:
                tried.append((cand, edited, evaluate(edited)))
        fitting = [t for t in tried if comfortable(t[2])]
        if fitting:
            cand, edited, after = min(
                fitting, key=lambda t: (RISK_ORDER[t[0].quality_risk], -(t[2].throughput or 0.0))
            )
        else:
            saving = [t for t in tried if t[2].peak_bytes < before.peak_bytes]
            if not saving:
                break
            cand, edited, after = min(saving, key=lambda t: t[2].peak_bytes)
        steps.append(Step(cand, w, edited, before, after, "fit"))
        w = edited
    return steps


def _prune(workload: Workload, steps: list[Step], evaluate: Evaluate) -> list[Step]:
    """Drop fit edits the final combination does not need (e.g. a small saving applied first)."""
    kept = list(steps)
    for step in reversed(steps):
        trial = [s for s in kept if s is not step]
        w = workload
        for s in trial:
            edited = apply(w, s.candidate)
            if edited is None:
                break
            w = edited
        else:
            if comfortable(evaluate(w)):
                kept = trial
    # Recompute before/after along the pruned path so every step's numbers are its own.
    out, w = [], workload
    for s in kept:
        edited = apply(w, s.candidate)
        if edited is None:
            return steps
        out.append(Step(s.candidate, w, edited, evaluate(w), evaluate(edited), "fit"))
        w = edited
    return out


def _goal_steps(workload: Workload, goal: Goal, evaluate: Evaluate) -> list[Step]:
    steps: list[Step] = []
    w = workload
    for _ in range(_MAX_STEPS):
        before = evaluate(w)
        best = None
        for cand in candidates(w, evaluate):
            edited = apply(w, cand)
            if edited is None:
                continue
            if cand.quality_risk == "changes-training":
                continue  # a hyperparameter (global batch): a labelled option, never silent
            after = evaluate(edited)
            if not comfortable(after) or (goal == "fit" and after.peak_bytes > before.peak_bytes):
                continue  # the fit goal never spends headroom for speed
            gain = relative_gain_pct(before, after, goal, w)
            if gain is None or not _allowed_for_goal(cand, gain):
                continue
            key = (
                RISK_ORDER[cand.quality_risk],
                -gain,
            )  # the safest edit that clears the bar, then the biggest
            if best is None or key < best[0]:
                best = (key, cand, edited, after)
        if best is None:
            break
        _, cand, edited, after = best
        steps.append(Step(cand, w, edited, before, after, "goal"))
        w = edited
    return steps


def _required_steps(workload: Workload, evaluate: Evaluate) -> list[Step]:
    """What the GPU cannot run as asked (bf16 on Turing, ...): changed before anything is measured."""
    steps: list[Step] = []
    w = workload
    for cand in candidates(workload, evaluate):
        edited = apply(w, cand) if cand.required else None
        if edited is not None:
            steps.append(Step(cand, w, edited, evaluate(w), evaluate(edited), "hardware"))
            w = edited
    return steps


def recommend(workload: Workload, goal: Goal, evaluate: Evaluate) -> list[Step]:
    """The recommended sequence of edits (what the GPU requires, fit, then goal), each with its own
    before/after."""
    return recommend_with_pruning(workload, goal, evaluate)[0]


def recommend_with_pruning(
    workload: Workload, goal: Goal, evaluate: Evaluate
) -> tuple[list[Step], list[str]]:
    """:func:`recommend`, plus one note per edit dropped because it no longer pays.

    Each goal edit is kept only if the final configuration without it is worse for the goal by at
    least the bar (``PLAN_MIN_GAIN_PCT``, ``PLAN_LOSSY_MIN_GAIN_PCT`` for edits with a quality risk):
    an edit that helped on its own can buy nothing once the others are applied (FP8 after a layout
    that already fills the GPU), and the plan should not ask anyone to take its risk or effort.
    """
    required = _required_steps(workload, evaluate)
    base = required[-1].after_workload if required else workload
    fit = _fit_steps(base, goal, evaluate)
    start = fit[-1].after_workload if fit else base
    if not comfortable(evaluate(start)):
        return required + fit, []  # still does not fit on this GPU count: scaling and hardware take over
    goal_steps, pruned = _prune_goal(start, _goal_steps(start, goal, evaluate), goal, evaluate)
    return required + fit + goal_steps, pruned


def _replay(workload: Workload, steps: list[Step], evaluate: Evaluate) -> list[Step] | None:
    """The steps re-applied in order from ``workload``, each with its own before/after (None: one no
    longer applies)."""
    out, w = [], workload
    for s in steps:
        edited = apply(w, s.candidate)
        if edited is None:
            return None
        out.append(Step(s.candidate, w, edited, evaluate(w), evaluate(edited), s.purpose))
        w = edited
    return out


def _prune_goal(
    start: Workload, steps: list[Step], goal: Goal, evaluate: Evaluate
) -> tuple[list[Step], list[str]]:
    """Drop goal edits that add less than the bar to the final configuration (see recommend_with_pruning)."""
    kept, notes = list(steps), []
    for step in reversed(steps):
        if len(kept) < 2:
            break  # a single goal edit was judged against the start already: it clears the bar
        full = kept[-1].after
        trial = _replay(start, [s for s in kept if s is not step], evaluate)
        if trial is None:
            continue
        without = trial[-1].after if trial else evaluate(start)
        if not comfortable(without):
            continue
        adds = relative_gain_pct(without, full, goal, start)
        bar = T.PLAN_LOSSY_MIN_GAIN_PCT if step.candidate.quality_risk in _LOSSY else T.PLAN_MIN_GAIN_PCT
        if adds is not None and adds < bar:
            kept = trial
            later = [s for s in kept if s.candidate.changes.keys() & step.candidate.changes.keys()]
            if later:
                notes.append(
                    f"Pruned '{step.candidate.title}': a later edit replaces it "
                    f"('{later[-1].candidate.title}')."
                )
                continue
            notes.append(
                f"Pruned '{step.candidate.title}': on top of the other edits it adds {adds:.1f} % "
                f"{goal_metric_name(goal, start)}, below the {bar:g} % bar for "
                f"{step.candidate.quality_risk} quality risk."
            )
    return kept, notes


# Keys a layout or a batch change rewrites together: an edit touching them is not undone on its own.
_LAYOUT_KEYS = frozenset({"gpu", "num_gpus", "tp", "pp", "sharding", "batch_size", "grad_accum"})


def prune_final(
    config: Workload, steps: list[Step], goal: Goal, evaluate: Evaluate
) -> tuple[Workload, list[Step], list[str]]:
    """Undo edits the final configuration does not need, once the layout and GPU are settled.

    A memory edit taken to fit the user's layout (full checkpointing, 8-bit optimizer, FP8) can be
    needless after the scaling decision splits the model another way; an edit stays only if the
    configuration without it does not fit comfortably, or is worse for the goal by the bar.
    """
    notes: list[str] = []
    kept = list(steps)
    for step in reversed(steps):
        changes = step.candidate.changes
        if step.purpose == "hardware" or not changes or _LAYOUT_KEYS & changes.keys():
            continue
        if any(getattr(config, k) != v for k, v in changes.items()):
            continue  # a later edit or the layout already replaced it
        try:
            reverted = config.with_changes(**{k: getattr(step.before_workload, k) for k in changes})
        except GpuwiseError:
            continue
        without = evaluate(reverted)
        if not comfortable(without):
            continue
        adds = relative_gain_pct(without, evaluate(config), goal, config)
        bar = T.PLAN_LOSSY_MIN_GAIN_PCT if step.candidate.quality_risk in _LOSSY else T.PLAN_MIN_GAIN_PCT
        if adds is None or adds >= bar:
            continue
        config = reverted
        kept.remove(step)
        effect = f"adds {adds:.1f} %" if adds >= 0 else f"costs {-adds:.1f} %"
        notes.append(
            f"Pruned '{step.candidate.title}': the final layout fits without it "
            f"({without.headroom_pct:.0f} % free) and it {effect} {goal_metric_name(goal, config)} "
            f"(the bar is {bar:g} %)."
        )
    return config, kept, notes


def _merge_repeats(steps: list[Step]) -> list[Step]:
    """An edit repeated back to back (e.g. concurrency raised twice) becomes one row; repeats with
    other edits in between stay separate, so each row's impact is its own."""
    out: list[Step] = []
    for step in steps:
        prev = out[-1] if out else None
        if prev is None or prev.candidate.id != step.candidate.id:
            out.append(step)
            continue
        cand = Candidate(
            prev.candidate.id,
            step.candidate.title,
            {**prev.candidate.changes, **step.candidate.changes},
            step.candidate.quality_risk,
            step.candidate.saves_memory,
        )
        out[-1] = Step(cand, prev.before_workload, step.after_workload, prev.before, step.after, prev.purpose)
    return out


def _marginal(final: Workload | None, cand: Candidate, goal: Goal, evaluate: Evaluate) -> float | None:
    """What `cand` adds on top of the recommended config (None if it does not apply there)."""
    if final is None:
        return None
    edited = apply(final, cand)
    if edited is None or edited == final:
        return None
    before, after = evaluate(final), evaluate(edited)
    if not comfortable(after):
        return None
    return relative_gain_pct(before, after, goal, final)


@dataclass(frozen=True)
class _Judging:
    """What every single edit is judged against: the workload as given and the recommended config."""

    workload: Workload
    goal: Goal
    evaluate: Evaluate
    current: Outcome
    metric: str  # the goal's metric, in words
    applied: frozenset[str]  # technique ids the recommended config applies
    final: Workload | None
    finding_ids: frozenset[FindingId]


def assess(
    workload: Workload,
    goal: Goal,
    evaluate: Evaluate,
    steps: list[Step],
    final: Workload | None = None,
    finding_ids: frozenset[FindingId] = frozenset(),
) -> list[Technique]:
    """Every single edit of the workload as given, plus the edits the combination applied later,
    each with its impact and verdict, ranked: recommended, optional, not recommended.

    Single edits are judged on the workload as the GPU can run it (after the required steps): a bf16 job
    on a T4 is compared in fp16, so no edit is credited with leaving a dtype the GPU lacks."""
    workload = next((s.after_workload for s in reversed(steps) if s.purpose == "hardware"), workload)
    ctx = _Judging(
        workload,
        goal,
        evaluate,
        evaluate(workload),
        goal_metric_name(goal, workload),
        frozenset(s.candidate.id for s in steps),
        final,
        finding_ids,
    )
    # Recommended rows keep the order they were applied in.
    out = [(0, float(i), _recommended(step, ctx)) for i, step in enumerate(_merge_repeats(steps))]
    for cand in candidates(workload, evaluate):
        if cand.id in ctx.applied:
            continue
        edited = apply(workload, cand)
        if edited is None:
            continue
        after = evaluate(edited)
        gain = relative_gain_pct(ctx.current, after, goal, workload)
        verdict, reason, rank = _judge(cand, after, gain, ctx)
        out.append((rank, -(gain or 0.0), _make(cand, workload, ctx.current, after, verdict, reason)))
    out.sort(key=lambda item: (item[0], item[1]))
    return [t for _, _, t in out]


def _recommended(step: Step, ctx: _Judging) -> Technique:
    """A step of the recommended combination, measured from the step before it."""
    if step.purpose == "hardware":
        why = "required on this GPU, before any other change"
    elif step.purpose == "goal":
        why = f"the safest edit that clears the bar, largest gain in {ctx.metric}"
    elif impact(step.before, step.after).makes_it_fit:
        why = "makes it fit"
    else:
        why = "saves memory toward a fit"
    if step.before_workload.gpu != ctx.workload.gpu:
        why += f" (on {step.before_workload.gpu}, where the config moves the job)"
    elif step.before_workload != ctx.workload and step.purpose != "hardware":
        why += " (measured after the steps before it)"
    made = _make(
        step.candidate,
        step.before_workload,
        step.before,
        step.after,
        "recommended",
        f"In the recommended config: {why}.",
    )
    return replace(made, needed_to_fit=step.purpose in {"hardware", "fit"})


def _judge(cand: Candidate, after: Outcome, gain: float | None, ctx: _Judging) -> tuple[Verdict, str, int]:
    """Verdict, reason and rank (1 optional, 2 not recommended) of one edit left out of the config."""
    current = ctx.current
    if not after.fits:
        used, capacity = after.peak_bytes / GiB, after.capacity_bytes / GiB
        return "not-recommended", f"Still does not fit ({used:.1f} of {capacity:.1f} GiB).", 2
    if not comfortable(current) and comfortable(after):
        return (
            "optional",
            "Also makes it fit, but with more quality risk or less speed than the chosen edit.",
            1,
        )
    if not comfortable(current):
        return "not-recommended", f"Leaves too little headroom ({after.headroom_pct:.0f} % free).", 2
    if gain is not None and gain >= T.PLAN_MIN_GAIN_PCT:
        return "optional", f"Helps {ctx.metric} by {gain:.0f} %, but {_why_not_chosen(cand, ctx)}.", 1
    return _not_worth_it(cand, after, gain, ctx)


def _why_not_chosen(cand: Candidate, ctx: _Judging) -> str:
    """Why an edit that helps the goal on its own is left out of the recommended config."""
    if cand.id in _FIT_ONLY:
        return (
            "changes what is trained (adapters instead of all weights): "
            "worth it to fit or to cut cost, not for speed alone"
        )
    if cand.id in ctx.applied:
        return "the recommended config applies a variant of it"
    if cand.quality_risk == "changes-training":
        return (
            "it changes a training hyperparameter (the global batch per optimizer step), so it is a "
            "separate option, never part of the recommended config: retune the learning rate and "
            "warm-up if you take it"
        )
    extra = _marginal(ctx.final, cand, ctx.goal, ctx.evaluate)
    if extra is None:
        on_top = "it conflicts with the recommended config"
    elif extra >= 0:
        on_top = f"on top of the recommended config it adds {extra:.1f} %"
    else:
        on_top = f"on top of the recommended config it is {-extra:.0f} % worse"
    if cand.quality_risk not in _LOSSY:
        return on_top
    why = f"it trades accuracy or changes the optimization, and {on_top}"
    if extra is not None and extra >= T.PLAN_LOSSY_MIN_GAIN_PCT:
        why += ": weigh it against your quality bar"
    return why


def _not_worth_it(
    cand: Candidate, after: Outcome, gain: float | None, ctx: _Judging
) -> tuple[Verdict, str, int]:
    """No gain for the goal: not recommended, unless a measured finding points at what the models miss."""
    current, imp = ctx.current, impact(ctx.current, after)
    hinted = sorted(set(ADDRESSES.get(cand.id, ())) & ctx.finding_ids & _OUTSIDE_THE_MODEL)
    if cand.id == "bigger_batch" and "small_batch" not in ctx.finding_ids:
        hinted = []  # the model ruled small batches out: idle time alone is no reason for a bigger one
    harmless = comfortable(after) and (gain is None or gain > -T.PLAN_MIN_GAIN_PCT)
    if hinted and harmless:
        blind = (
            "it assumes a GPU that is kept busy"
            if {"small_batch", "low_utilization"} & set(hinted)
            else "it does not separate this effect"
        )
        reason = (
            f"The {', '.join(hinted)} finding points here, but the performance model predicts "
            f"{describe(imp, after)} because {blind}: try it and measure."
        )
        return "optional", reason, 1
    if imp.memory_saved_bytes > 0 and comfortable(current):
        why = f"memory is not short ({current.headroom_pct:.0f} % free) and it does not help {ctx.metric}"
    elif gain is not None and gain < 0:
        why = f"it makes {ctx.metric} {abs(gain):.0f} % worse"
    else:
        why = f"no gain in {ctx.metric}"
    return "not-recommended", f"Not worth it: {why}.", 2


def _make(
    cand: Candidate, before_workload: Workload, before: Outcome, after: Outcome, verdict: Verdict, reason: str
) -> Technique:
    caveat, source = K.CAVEATS.get(
        "bigger_batch_global" if cand.quality_risk == "changes-training" else cand.id, ("", "")
    )
    return Technique(
        id=cand.id,
        title=cand.title,
        changes={
            k: (getattr(before_workload, k), v)
            for k, v in cand.changes.items()
            if getattr(before_workload, k) != v
        },
        before=before,
        after=after,
        impact=impact(before, after),
        quality_risk=cand.quality_risk,
        verdict=verdict,
        reason=reason,
        tools=K.TECHNIQUE_TOOLS.get(cand.id, ()),
        caveat=caveat,
        caveat_source=source,
        finding_ids=ADDRESSES.get(cand.id, ()),
        effort=K.EFFORT.get(cand.id, "low"),
    )


_EFFORT_ORDER: dict[Effort, int] = {effort: i for i, effort in enumerate(EFFORTS)}


def expected_gain_pct(t: Technique, goal: Goal, workload: Workload) -> float | None:
    """A technique's gain toward the goal, in % (capped by an idle GPU when that is known)."""
    x = t.capped_throughput_x or t.impact.throughput_x
    if t.before is t.after:  # not a workload edit the models re-ran (fixing the pipeline): its own speed-up
        return None if x is None else 100.0 * (x - 1)
    gain = relative_gain_pct(t.before, t.after, goal, workload)
    if gain is not None and t.capped_throughput_x and t.impact.throughput_x and t.impact.throughput_x > 1:
        gain *= (t.capped_throughput_x - 1) / (t.impact.throughput_x - 1)  # the same Amdahl cap on the goal
    return gain


def rank_by_gain(techniques: list[Technique], goal: Goal, workload: Workload) -> list[Technique]:
    """Edits that make the job fit first (nothing else counts until it runs), then by expected gain toward
    the goal, quality risk and effort breaking ties; not-recommended edits last, in the same order."""

    def key(t: Technique) -> tuple:
        gain = t.gain_pct
        return (
            t.verdict == "not-recommended",
            not t.needed_to_fit,
            -(gain if gain is not None else float("-inf")),
            RISK_ORDER[t.quality_risk],
            _EFFORT_ORDER[t.effort],
        )

    gained = [replace(t, gain_pct=expected_gain_pct(t, goal, workload)) for t in techniques]
    return sorted(gained, key=key)
