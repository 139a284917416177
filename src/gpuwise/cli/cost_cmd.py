"""`gpuwise cost`: what a workload costs to train or serve, and when self-hosting beats an API."""

# No `from __future__ import annotations`: @workload_command hands these annotations to Typer as objects.
from typing import TYPE_CHECKING, Annotated

import typer

from gpuwise.cli.options import alias_value
from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit, one_format
from gpuwise.cli.workload_flags import workload_command
from gpuwise.workload import Workload

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from gpuwise.perf.cost import CostEstimate
    from gpuwise.serving.economics import ServingEconomics

__all__ = ["cost"]


def _estimate(
    workload: Workload,
    econ: "ServingEconomics | None",
    usd_per_hour: float | None,
    api_usd_per_mtok: float | None,
    cooling_overhead: float | None,
    usd_per_kwh: float | None,
) -> "CostEstimate":
    """`estimate_cost` with the serving figures of ``econ`` (the deployment ``plan`` prices at the demand)."""
    from gpuwise.perf.cost import estimate_cost
    from gpuwise.serving.economics import serving_cost

    return estimate_cost(
        workload,
        usd_per_gpu_hour=usd_per_hour,
        api_usd_per_mtok=api_usd_per_mtok,
        cooling_overhead_pct=cooling_overhead,
        usd_per_kwh=usd_per_kwh,
        serving=serving_cost(econ) if econ is not None else None,
    )


@workload_command
def cost(
    workload: Workload,
    usd_per_gpu_hour: Annotated[
        float | None,
        typer.Option("--usd-per-gpu-hour", help="Your $ per GPU-hour (overrides the catalog)."),
    ] = None,
    old_usd_per_hour: Annotated[
        float | None, typer.Option("--usd-per-hour", hidden=True, help="Old spelling of --usd-per-gpu-hour.")
    ] = None,
    api_usd_per_mtok: Annotated[
        float | None,
        typer.Option(
            "--api-usd-per-mtok",
            help="API price per 1M tokens (prompt + output) for the self-hosting break-even.",
        ),
    ] = None,
    cooling_overhead: Annotated[
        float | None,
        typer.Option(
            "--cooling-overhead",
            help="Facility overhead on the node's power in %: (PUE - 1) x 100 (default 56, PUE 1.56).",
        ),
    ] = None,
    usd_per_kwh: Annotated[
        float | None, typer.Option("--usd-per-kwh", help="Electricity price for the energy line.")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option("--budget", help="Monthly budget in $ for buy vs rent vs API (monthly_budget_usd)."),
    ] = None,
    all_gpus: Annotated[
        bool, typer.Option("--all-gpus", help="Compare the same workload on every catalog GPU.")
    ] = False,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Time and $ of a training run, $ per 1M tokens served, energy, and buy vs rent vs API.

    A serving demand is priced as `plan` sizes it. `--utilization` is the busy share (power, run
    length); GPUs are paid for the hours they are held (held_hours_per_month, default the month).
    Buying: purchase_usd_per_gpu, amortization_months, ops_usd_per_month, pue (docs/cost.md).
    """
    from gpuwise.report import cost_view, tco_view

    one_format(as_json, as_markdown)  # before the work, not after it
    usd_per_hour = alias_value(
        "--usd-per-gpu-hour", usd_per_gpu_hour, None, "--usd-per-hour", old_usd_per_hour
    )

    if all_gpus:
        return _all_gpus(workload, usd_per_hour, cooling_overhead, as_json, as_markdown, html)
    if budget is not None:
        workload = workload.with_changes(monthly_budget_usd=budget)
    from gpuwise.serving.economics import serving_economics, serving_tco

    econ = serving_economics(workload, usd_per_gpu_hour=usd_per_hour)
    estimate = _estimate(workload, econ, usd_per_hour, api_usd_per_mtok, cooling_overhead, usd_per_kwh)
    from gpuwise.report.document import Bullets, Document, Heading
    from gpuwise.report.serving_view import figures_lines
    from gpuwise.serving.summary import ServingFigures, serving_capacity

    _warn(workload, estimate)
    tco = serving_tco(workload, econ, usd_per_gpu_hour=usd_per_hour, perf=estimate.perf)
    tco_doc = tco_view.document(tco)
    cap = serving_capacity(workload)
    figures = ServingFigures(cap, econ.deployment if econ else None) if cap is not None else None
    lines = figures_lines(figures.kv, figures.at_demand) if figures else []

    def document() -> Document:
        doc = cost_view.cost_document(estimate)
        if lines:  # the KV capacity and demand figures `memory` and `plan` show too
            doc.add(Heading("Serving: KV capacity and demand", 3), Bullets(lines))
        return doc.include(tco_doc)

    emit(
        {
            "cost": estimate.to_dict(),
            "tco": tco.to_dict(),
            **({"serving": figures.to_dict()} if figures else {}),
        },
        "cost",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=document,
    )


def _warn(workload: Workload, estimate: "CostEstimate") -> None:
    """The input checks' warning lines (sequence beyond the context, absurd run times) on stderr."""
    from gpuwise.plan.input_checks import input_warnings

    run_s = estimate.training.run_time_s if estimate.training is not None else None
    for line in input_warnings(workload, run_time_s=run_s):
        typer.echo(f"gpuwise: warning: {line}", err=True)


def _all_gpus(
    workload: Workload,
    usd_per_hour: float | None,
    cooling_overhead: float | None,
    as_json: bool,
    as_markdown: bool,
    html: "Path | None",
) -> None:
    """`cost --all-gpus`: the same workload priced on every catalog GPU."""
    from gpuwise.perf.cost import compare_gpus
    from gpuwise.report import cost_view

    rows = compare_gpus(
        workload,
        usd_per_gpu_hour=usd_per_hour,
        cooling_overhead_pct=cooling_overhead,
        utilization_pct=workload.utilization_pct,
    )
    title = (
        f"{workload.model} · {workload.task} · {workload.precision} on {workload.num_gpus} GPU"
        f"{'s' if workload.num_gpus > 1 else ''} of each type"
    )
    training, vision = workload.is_training, workload.is_cv
    emit(
        {"workload": workload.to_dict(), "gpus": [r.to_dict() for r in rows]},
        "cost_comparison",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: cost_view.comparison_document(rows, title, training, vision),
    )
