"""Charts of a plan: hardware options on cost against time (the top-ranked one marked), and predicted
against measured step time and memory when the plan has measured evidence."""

from __future__ import annotations

from gpuwise.plan.types import Outcome, Plan
from gpuwise.report.document import Block, Chart, Series
from gpuwise.units import GiB

__all__ = ["hardware_chart", "measured_charts", "plan_charts"]


def _time_s(o: Outcome) -> float | None:
    if o.tpot_ms is not None:
        return o.tpot_ms / 1000
    return o.step_time_s


def _cost(o: Outcome) -> float | None:
    return o.usd_per_run if o.usd_per_run is not None else o.usd_per_1m


def hardware_chart(plan: Plan) -> Chart | None:
    """Each fitting option by its time and cost, the plan's first choice marked."""
    options = [
        h for h in plan.hardware if h.outcome.fits and _time_s(h.outcome) and _cost(h.outcome) is not None
    ]
    if len(options) < 2:
        return None
    best = min(options, key=lambda h: h.rank or len(plan.hardware))
    per_run = options[0].outcome.usd_per_run is not None
    unit = "images" if plan.workload.is_cv else "tokens"
    time_label = "time per output token" if options[0].outcome.tpot_ms is not None else "step time"
    return Chart(
        "scatter",
        "Hardware options: cost against time",
        [f"{h.num_gpus} × {h.gpu}" for h in options],
        [Series("cost", [_cost(h.outcome) or 0.0 for h in options])],
        x_label=f"{time_label} (ms)",
        y_label="$ per run" if per_run else f"$ per 1M {unit}",
        x=[(_time_s(h.outcome) or 0.0) * 1000 for h in options],
        marked=[options.index(best)],
        mark_label="recommended",
        description=f"{len(options)} GPU options that fit, by predicted time and cost; lower left is better; "
        f"the plan ranks {best.num_gpus} × {best.gpu} first for goal '{plan.goal}'.",
        in_text=False,
    )


def measured_charts(plan: Plan) -> list[Chart]:
    """Predicted (plan.current) next to each measurement of the same thing."""
    measured = [e for e in plan.evidence if e.source != "prediction"]
    charts = []
    steps = [(e.source, e.steps.step_time_s) for e in measured if e.steps.step_time_s]
    if steps and plan.current.step_time_s:
        charts.append(
            Chart(
                "bar",
                "Step time: predicted and measured",
                ["predicted", *(f"measured ({source})" for source, _ in steps)],
                [Series("ms", [plan.current.step_time_s * 1000, *(s * 1000 for _, s in steps)])],
                x_label="",
                y_label="step time (ms)",
                marked=[0],
                mark_label="prediction",
                description="The performance model's step time next to the measured one(s).",
            )
        )
    peaks = [(e.source, e.memory.memory_peak_bytes) for e in measured if e.memory.memory_peak_bytes]
    if peaks:
        charts.append(
            Chart(
                "bar",
                "Peak memory per GPU: predicted and measured",
                ["predicted", *(f"measured ({source})" for source, _ in peaks)],
                [Series("GiB", [plan.current.peak_bytes / GiB, *((p or 0) / GiB for _, p in peaks)])],
                y_label="GiB",
                marked=[0],
                mark_label="prediction",
                description="The memory model's peak reserved memory next to the measured peak(s).",
            )
        )
    return charts


def plan_charts(plan: Plan) -> list[Block]:
    """The plan's charts: hardware options (when several fit) and the measured breakdowns (when
    evidence was given)."""
    chart = hardware_chart(plan)
    return [*([chart] if chart else []), *measured_charts(plan)]
