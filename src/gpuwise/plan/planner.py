"""`make_plan`: workload (+ measured evidence) -> the six-part Plan.

1 diagnosis      findings from the one rule engine over predicted + measured evidence
2 techniques     each edit re-evaluated by the memory and performance models, ranked for the goal
3 config         the recommended combination, with snippets to paste
4 memory         the VRAM breakdown, current and recommended
5 scaling        strategy, GPU count, whether NVLink matters
6 tools          what to use and why
plus hardware options and the fit report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuwise.catalog import get_gpu
from gpuwise.diagnose import Evidence, Finding, diagnose, rank_findings
from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.finding import Category
from gpuwise.errors import GpuwiseError
from gpuwise.perf.prediction import Bound
from gpuwise.plan import hardware as hw
from gpuwise.plan import knowledge as K
from gpuwise.plan import pipeline, placement
from gpuwise.plan import scaling as scale
from gpuwise.plan import snippets as snip
from gpuwise.plan.candidates import candidates
from gpuwise.plan.evaluate import Evaluator, attention_scores_bytes, larger_batch_speedup_x
from gpuwise.plan.evidence_sources import (
    cpu_run_note,
    host_side_of_cpu_run,
    merge_evidence,
    prediction_evidence,
    read_evidence_files,
)
from gpuwise.plan.goal import comfortable
from gpuwise.plan.input_checks import outcome_warnings
from gpuwise.plan.input_sizing import size_input_pipeline
from gpuwise.plan.techniques import (
    Step,
    apply,
    assess,
    prune_final,
    rank_by_gain,
    recommend,
    recommend_with_pruning,
)
from gpuwise.plan.tools import advise
from gpuwise.plan.types import (
    ConfigPlan,
    Diagnosis,
    HardwareOption,
    IdleCause,
    IdleStatus,
    MemoryMethod,
    MemoryView,
    Outcome,
    Plan,
    ScalingDecision,
    Technique,
)
from gpuwise.serving.economics import serving_tco
from gpuwise.units import GiB, fmt_rate
from gpuwise.workload import Workload
from gpuwise.workload.spec import Goal

# Finding categories in the order each goal cares about (ties within a severity only).
_GOAL_CATEGORIES: dict[Goal, tuple[Category, ...]] = {
    "fit": ("memory", "compute", "input", "host", "communication", "distributed", "hardware"),
    "latency": ("memory", "compute", "host", "communication", "input", "distributed", "hardware"),
    "throughput": ("input", "compute", "communication", "host", "memory", "distributed", "hardware"),
    "cost": ("input", "compute", "memory", "communication", "host", "distributed", "hardware"),
}


def make_plan(
    workload: Workload,
    evidence_files: Sequence[str | Path] = (),
    evidence: Sequence[Evidence] = (),
    traced: bool = False,
    model_factory: str | None = None,
    input_factory: str | None = None,
) -> Plan:
    """The plan for `workload`; `evidence_files` / `evidence` add measured evidence (profile, trace, runs).

    `traced` takes the current configuration's VRAM from a fake-tensor simulation of the real model
    (`model_factory` / `input_factory`: ``module:function`` for models outside the catalog)."""
    loaded, measured, cpu_notes = _measured_evidence(workload, evidence_files, evidence)
    ev = Evaluator()
    goal = workload.goal
    idle = pipeline.idle_share(workload, measured)
    try:
        current_pred = ev.predict(workload, full=True)
    except GpuwiseError as err:
        raise GpuwiseError(f"cannot plan {workload.model}: {err}") from None
    current = current_pred.outcome
    notes = [_ignored_predictions_note(len(loaded) - len(measured))] if len(measured) < len(loaded) else []
    notes += cpu_notes
    chosen = _choose_config(workload, goal, ev, idle)
    notes += chosen.pruned
    config_w, steps, scaling = chosen.workload, chosen.steps, chosen.scaling

    fit_steps = [s for s in steps if s.purpose == "fit"]
    fit_report = placement.fit_report(
        workload,
        current,
        fit_steps if config_w.gpu == workload.gpu else [],
        ev.outcome,
        local_steps=chosen.local_steps,
    )

    predicted = _prediction_evidence(workload, current_pred, ev)
    all_evidence = merge_evidence(predicted, measured)
    findings = _with_idle_confidence(_findings(measured, predicted, goal), idle)
    techniques = assess(
        workload, goal, ev.outcome, steps, final=config_w, finding_ids=frozenset(f.id for f in findings)
    )
    techniques = pipeline.fix_first(_bound_by_idle(techniques, idle), workload, current, idle)
    techniques = rank_by_gain(_superseded(techniques, config_w, scaling), goal, workload)
    diagnosis = _diagnosis(workload, current, findings, all_evidence)

    move_note = " ".join(filter(None, [chosen.move_note, pipeline.config_note(idle)]))
    config = _config_plan(workload, config_w, steps, chosen.outcome, findings, move_note)
    memory = _memory_view(workload, config_w, ev, traced, notes, model_factory, input_factory)
    tools = advise(
        workload,
        config_w,
        chosen.outcome,
        techniques,
        findings,
        scaling,
        chosen.hardware,
        measured=bool(measured),
        fit_needed=bool(fit_steps) or not comfortable(current),
    )
    notes = [*outcome_warnings(workload, current), *notes, *_notes(current_pred, measured, workload)]
    return Plan(
        workload=workload,
        goal=goal,
        current=current,
        diagnosis=diagnosis,
        techniques=techniques,
        config=config,
        memory=memory,
        scaling=scaling,
        tools=tools,
        hardware=chosen.hardware,
        fit=fit_report,
        evidence=all_evidence,
        notes=notes,
        input_pipeline=size_input_pipeline(config_w, chosen.outcome),
    )


def _measured_evidence(
    workload: Workload, evidence_files: Sequence[str | Path], evidence: Sequence[Evidence]
) -> tuple[list[Evidence], list[Evidence], list[str]]:
    """(everything passed, the measurements among it, notes on CPU-only runs).

    A plan's own predictions passed back as evidence are not measurements; a CPU-only run keeps
    only its host side (its device figures say nothing about `workload.gpu`)."""
    loaded = [*read_evidence_files(evidence_files), *evidence]
    measured = [e for e in loaded if e.source != "prediction"]
    cpu_notes = [cpu_run_note(e, workload.gpu) for e in measured if e.device == "cpu"]
    measured = [host_side_of_cpu_run(e) if e.device == "cpu" else e for e in measured]
    return loaded, measured, cpu_notes


@dataclass
class _Chosen:
    """The configuration the plan recommends and how it got there (all on the goal's terms)."""

    workload: Workload  # the recommended workload (edits, GPU, layout applied)
    steps: list[Step]  # every edit that leads there, in order
    local_steps: list[Step]  # the edits first tried on the user's own GPU
    hardware: list[HardwareOption]  # every catalog GPU option, ranked for the goal
    scaling: ScalingDecision  # held back while the GPU idles, priced (buy vs rent vs API)
    outcome: Outcome  # the recommended workload's predicted outcome
    move_note: str  # why the config left the user's GPU or layout ("" when it did not)
    pruned: list[str] = field(default_factory=list)  # edits dropped because they no longer pay


def _choose_config(workload: Workload, goal: Goal, ev: Evaluator, idle: pipeline.Idle | None) -> _Chosen:
    """Goal edits on the user's GPU; when they do not fit, move the job; then the scaling layout."""
    steps, pruned = recommend_with_pruning(workload, goal, ev.outcome)
    config_w = steps[-1].after_workload if steps else workload
    local_steps = list(steps)  # edits tried on the user's own GPU
    fits_here = comfortable(ev.outcome(config_w))
    # Hardware options carry the recommended config when it fits here; otherwise each GPU gets the
    # workload as given plus only the edits that GPU needs (a bigger GPU may need no lossy edit at all).
    hardware = hw.options(config_w if fits_here else workload, goal, ev.outcome)
    move_note = ""
    if not fits_here:
        config_w, steps, move_note = _relocate(workload, config_w, steps, goal, ev, hardware)
    scaling = scale.decide(config_w, goal, ev.outcome_on)
    config_w, layout_note = _adopt_layout(config_w, scaling, ev)
    config_w, steps, pruned_final = prune_final(config_w, steps, goal, ev.outcome)
    pruned += pruned_final
    scaling = _with_tco(pipeline.hold_back(scaling, idle), config_w)
    if layout_note:
        move_note = " ".join(filter(None, [move_note, layout_note]))
    return _Chosen(config_w, steps, local_steps, hardware, scaling, ev.outcome(config_w), move_note, pruned)


def _with_idle_confidence(findings: list[Finding], idle: pipeline.Idle | None) -> list[Finding]:
    """The predicted low_utilization finding takes the idle figure's confidence: the user's own
    figure (or a measurement) is surer than a prediction."""
    if idle is None or idle.confidence == "high":
        return findings
    return [
        replace(f, confidence=idle.confidence)
        if f.id == "low_utilization" and f.source == "prediction"
        else f
        for f in findings
    ]


def _ignored_predictions_note(count: int) -> str:
    return (
        f"Ignored {count} predicted evidence item(s) passed as evidence: "
        "--evidence takes measurements (profile, trace, telemetry)."
    )


def _config_plan(
    workload: Workload,
    config_w: Workload,
    steps: list[Step],
    outcome: Outcome,
    findings: list[Finding],
    note: str,
) -> ConfigPlan:
    """The recommended config: its diff from the workload, snippets to paste (with the measured
    findings' fixes), and the global batch before and after."""
    changes = {
        k: (getattr(workload, k), v)
        for k, v in config_w.to_dict().items()
        if k not in {"name"} and getattr(workload, k) != (tuple(v) if isinstance(v, list) else v)
    }
    snippets = snip.snippets(config_w, changes)
    for f in findings:
        if f.source != "prediction" and f.fix_snippet:
            snippets[f"fix: {f.id}"] = f.fix_snippet + ("\n" if not f.fix_snippet.endswith("\n") else "")
    return ConfigPlan(
        workload=config_w,
        changes=changes,
        applied=tuple(s.candidate.id for s in steps),
        outcome=outcome,
        snippets=snippets,
        global_batch_before=workload.global_batch if workload.is_training else None,
        global_batch_after=config_w.global_batch if config_w.is_training else None,
        note=note,
    )


def _relocate(
    original: Workload, config_w: Workload, steps: list[Step], goal: Goal, ev: Evaluator, hardware: list
) -> tuple[Workload, list[Step], str]:
    """The job does not fit the user's GPU count: move it where it fits (another GPU, or more GPUs)."""
    if original.num_gpus == 1:
        best = hw.best_fitting(hardware, single_gpu=True)
        if best is not None:
            return _placed(
                original,
                best,
                goal,
                ev,
                f"{original.gpu} cannot hold this job even with the memory techniques "
                f"tried; the config moves it to one {best.gpu} (top-ranked GPU that fits for goal '{goal}').",
            )
    decision = scale.decide(config_w, goal, ev.outcome_on)
    if decision.num_gpus:
        layout = scale.adopt(config_w, decision)
        return (
            layout,
            steps,
            f"{original.num_gpus} × {original.gpu} is too small; the config uses {decision.strategy}.",
        )
    best = hw.best_fitting(hardware, single_gpu=False)
    if best is not None:
        return _placed(
            original,
            best,
            goal,
            ev,
            f"The config moves the job to {best.num_gpus} × {best.gpu}, the top-ranked option that fits.",
        )
    return config_w, steps, "Nothing tried fits: see the fit section."


def _placed(
    original: Workload, option: Any, goal: Goal, ev: Evaluator, note: str
) -> tuple[Workload, list[Step], str]:
    """The hardware option's workload (the fit edits made on that GPU), then the goal's edits there."""
    placed = hw.place(original, get_gpu(option.gpu), goal, ev.outcome)
    if placed.workload is None:
        return original, [], "Nothing tried fits: see the fit section."
    extra = recommend(placed.workload, goal, ev.outcome)
    final = extra[-1].after_workload if extra else placed.workload
    return final, [*placed.steps, *extra], note


def _bound_by_idle(techniques: list[Technique], idle: pipeline.Idle | None) -> list[Technique]:
    """Amdahl: the models assume a busy GPU; if it idles (waiting for input, host; measured or stated
    by the user), a compute speed-up only shortens the busy part. Say how far that caps each gain."""
    if idle is None:
        return techniques
    share = min(idle.pct, T.MAX_REMOVABLE_STEP_PCT) / 100.0
    out = []
    for t in techniques:
        x = t.impact.throughput_x
        if x and x > 1 and t.verdict != "not-recommended" and t.id != pipeline.TECHNIQUE_ID:
            cap = 1.0 / (share + (1.0 - share) / x)
            t = replace(
                t,
                reason=t.reason
                + f" {idle.basis}: the GPU idles {idle.pct:.0f} % of each step, so until that is fixed "
                f"this gives at most {cap:.2f}× (not {x:.2f}×).",
                capped_throughput_x=round(cap, 4),
            )
        out.append(t)
    return out


def _superseded(techniques: list[Technique], final: Workload, scaling: ScalingDecision) -> list[Technique]:
    """A recommended edit the final layout undoes says so (never silently dropped from the plan)."""
    out = []
    for t in techniques:
        lost = {  # fix_pipeline's utilization is a projection, not a config edit the layout could undo
            k: v
            for k, (_, v) in t.changes.items()
            if t.verdict == "recommended" and k != "utilization_pct" and getattr(final, k) != v
        }
        if lost and not {"batch_size", "grad_accum"} >= lost.keys():
            now = ", ".join(f"{k}={getattr(final, k)}" for k in lost)
            t = replace(
                t,
                reason=t.reason + f" The final config runs {now} instead: the scaling decision "
                f"({scaling.strategy}) or a later step replaces it.",
            )
        out.append(t)
    return out


def _adopt_layout(w: Workload, decision: ScalingDecision, ev: Evaluator) -> tuple[Workload, str]:
    """The config uses the scaling decision's layout (it only differs when that layout is clearly better)."""
    if not decision.num_gpus:
        return w, ""
    layout = (decision.num_gpus, decision.tp, decision.pp, decision.sharding if w.is_training else w.sharding)
    if layout == (w.num_gpus, w.tp, w.pp, w.sharding):
        return w, ""
    adopted = scale.adopt(w, decision)
    if not comfortable(ev.outcome(adopted)):
        return w, ""
    note = f"Parallel layout from the scaling decision: {decision.strategy}."
    if w.is_training and adopted.sharding != w.sharding:
        note += (
            f" It replaces sharding {w.sharding} with {adopted.sharding}"
            + (
                f" (TP{adopted.tp}, PP{adopted.pp} split the model instead)"
                if adopted.tp * adopted.pp > 1
                else ""
            )
            + ": the scaling section compares both."
        )
    return adopted, note


def _prediction_evidence(workload: Workload, current_pred: Any, ev: Evaluator) -> Evidence:
    """The models' view of the workload as evidence: fit options when it does not fit comfortably, the
    attention scores' bytes, and the speed-up a larger batch would buy."""
    fit_options = _fit_options_bytes(workload, ev) if not comfortable(current_pred.outcome) else {}
    return prediction_evidence(
        workload,
        current_pred,
        fit_options,
        attention_scores_bytes(ev, workload),
        larger_batch_speedup_x(ev, workload),
    )


def _fit_options_bytes(workload: Workload, ev: Evaluator) -> dict[str, float]:
    """Predicted peak with each single memory edit, for the oom_risk finding's fix."""
    out: dict[str, float] = {}
    for cand in candidates(workload, ev.outcome):
        if not cand.saves_memory:
            continue
        edited = apply(workload, cand)
        if edited is not None:
            label = ", ".join(f"{k}={v}" for k, v in cand.changes.items() if getattr(workload, k) != v)
            out[label] = float(ev.outcome(edited).peak_bytes)
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def _findings(measured: list[Evidence], predicted: Evidence, goal: Goal) -> list[Finding]:
    """Measured findings win over predicted ones with the same id; ranked by severity, then the goal."""
    on_gpu = [e for e in measured if e.device != "cpu"]
    # A CPU-only run's host side holds for a GPU run, less surely (its loader shared cores with compute).
    from_cpu = [replace(f, confidence="medium") for f in diagnose([e for e in measured if e.device == "cpu"])]
    from_measured = rank_findings([*diagnose(on_gpu), *from_cpu]) if measured else []
    ids = {f.id for f in from_measured}
    from_prediction = [f for f in diagnose(predicted) if f.id not in ids]
    ranked = rank_findings([*from_measured, *from_prediction])
    order = _GOAL_CATEGORIES[goal]
    position = {f.id: i for i, f in enumerate(ranked)}
    return sorted(
        ranked,
        key=lambda f: (
            f.severity_rank,
            order.index(f.category) if f.category in order else len(order),
            position[f.id],
        ),
    )


def _diagnosis(w: Workload, current: Outcome, findings: list[Finding], evidence: list[Evidence]) -> Diagnosis:
    gpu = get_gpu(w.gpu)
    where = f"{w.num_gpus} × {gpu.id}"
    mem = f"peak {current.peak_bytes / GiB:.1f} GiB of {current.capacity_bytes / GiB:.1f} GiB per GPU"
    if not current.fits:
        summary = f"Does not fit on {where}: {mem}."
    elif w.is_training:
        summary = (
            f"Predicted {_bound_words(current.bound)} on {where}: {current.step_time_s:.3g} s per step, "
            f"{current.throughput:,.0f} {current.throughput_unit}"
            + (f", MFU {current.mfu_pct:.0f} %" if current.mfu_pct is not None else "")
            + f"; {mem}."
        )
    elif w.is_cv:
        summary = (
            f"Predicted {_bound_words(current.bound)} on {where}: "
            f"{fmt_rate(current.throughput or 0.0)} images/s; {mem}."
        )
    else:
        summary = (
            f"Decode is {_bound_words(current.bound)} on {where}: {current.tpot_ms:.1f} ms per token, "
            f"time to first token {current.ttft_ms:,.0f} ms, {current.throughput:,.0f} output tokens/s"
            + (
                f"; the KV cache holds {current.max_concurrency} concurrent sequences"
                if current.max_concurrency
                else ""
            )
            + f"; {mem}."
        )
    measured = [f for f in findings if f.source != "prediction"]
    if measured:
        summary += " Measured: " + "; ".join(f.summary.rstrip(".") for f in measured[:2]) + "."
    return Diagnosis(
        summary=summary,
        bound=current.bound,
        findings=tuple(findings),
        idle_causes=_idle_causes(w, findings, evidence),
    )


_BOUND_WORDS: dict[Bound, str] = {
    "compute": "compute-bound",
    "memory_bandwidth": "memory-bandwidth-bound",
    "communication": "communication-bound",
    "host": "host/launch-bound",
}


def _bound_words(bound: Bound | None) -> str:
    return "unbounded" if bound is None else _BOUND_WORDS[bound]


def _idle_causes(w: Workload, findings: list[Finding], evidence: list[Evidence]) -> tuple[IdleCause, ...]:
    """When utilization is low, each usual cause: found, ruled out by a measurement, or not measured."""
    if not any(f.id == "low_utilization" for f in findings):
        return ()
    found = {f.id: f for f in findings}
    out = []
    for cause, what, fields, how in K.IDLE_CAUSES:
        if cause == "comm_bound" and w.num_gpus == 1:
            continue
        if cause in found:
            f = found[cause]
            out.append(IdleCause(cause, what, "found", f.summary, how))
            continue
        measured = [e for e in evidence if e.source != "prediction" and any(_has(e, name) for name in fields)]
        status: IdleStatus
        if cause == "small_batch":
            measured = [
                e
                for e in evidence
                if e.memory.memory_peak_bytes is not None and e.memory.memory_capacity_bytes
            ]
            status = "ruled-out" if measured else "not-measured"
            detail = "memory headroom is too small to raise the batch" if measured else "no memory figure"
            gain = next(
                (e.model.larger_batch_speedup_x for e in evidence if e.model.larger_batch_speedup_x), None
            )
            if gain is not None and gain < 1 + T.SMALL_BATCH_MIN_PREDICTED_GAIN_PCT / 100:
                status = "ruled-out"
                detail = (
                    f"the performance model predicts {gain:.2f}x from a larger batch: "
                    "the kernels are already large"
                )
        elif measured:
            status, detail = (
                "ruled-out",
                "measured below the rule's threshold ("
                + ", ".join(sorted({e.source for e in measured}))
                + ")",
            )
        else:
            status, detail = "not-measured", "the prediction cannot see it"
        out.append(IdleCause(cause, what, status, detail, how))
    return tuple(out)


def _has(ev: Evidence, name: str) -> bool:
    value = ev.value(name)
    return bool(value) if isinstance(value, (dict, list)) else value is not None


def _memory_view(
    original: Workload,
    config_w: Workload,
    ev: Evaluator,
    traced: bool,
    notes: list[str],
    model_factory: str | None,
    input_factory: str | None,
) -> MemoryView:
    current = ev.memory_dict(original)
    method: MemoryMethod = "analytic"
    if traced:
        from gpuwise.plan.simulated_memory import traced_memory

        analytic_total = current["device_total_bytes"]
        current, method = traced_memory(original, model_factory, input_factory), "traced"
        notes.append(
            "VRAM of the current configuration from a traced simulation "
            f"({current['device_total_bytes'] / GiB:.1f} GiB; "
            f"the analytic model says {analytic_total / GiB:.1f} GiB); every what-if stays analytic."
        )
        if bool(current["fits"]) != bool(ev.outcome(original).fits):
            notes.append(
                "The traced and analytic estimates disagree on whether it fits: trust the traced figure for "
                "the "
                "current configuration and re-check edits with `gpuwise memory --traced`."
            )
    recommended = ev.memory_dict(config_w) if config_w != original else None
    return MemoryView(current=current, recommended=recommended, method=method)


def _notes(pred: Any, measured: list[Evidence], w: Workload) -> list[str]:
    notes = list(pred.assumptions)
    for gpu in sorted({e.gpu for e in measured if e.gpu and e.gpu != w.gpu}):
        notes.append(
            f"Measured evidence comes from {gpu}, the plan is for {w.gpu}: shares (input wait, idle, fp32) "
            "carry "
            "over, absolute times do not."
        )
    if not measured:
        notes.append(
            "All numbers are predictions (confidence low): run `gpuwise profile` and pass its --json with "
            "--evidence."
        )
    return notes


__all__ = ["make_plan"]


def _with_tco(scaling: ScalingDecision, w: Workload) -> ScalingDecision:
    """Buy vs rent vs API at the scaling decision's GPU count, so --json carries what the plan shows."""
    try:
        return replace(scaling, tco=serving_tco(w, num_gpus=scaling.num_gpus or w.num_gpus))
    except GpuwiseError as err:  # e.g. a user GPU without prices: the plan still stands
        return replace(scaling, tco_note=f"Not priced: {err}")
