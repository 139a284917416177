"""`gpuwise cost`: what a workload costs to train or serve, and when self-hosting beats an API."""

# No `from __future__ import annotations`: @workload_command hands these annotations to Typer as objects.
from typing import Annotated

import typer

from gpuwise.cli.options import alias_value
from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit, one_format
from gpuwise.cli.workload_flags import workload_command
from gpuwise.workload import Workload

__all__ = ["cost"]


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
            "--cooling-overhead", help="Facility overhead on GPU power in % (default 40, i.e. PUE 1.4)."
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

    Speed comes from the performance model (`gpuwise.perf`); prices from the GPU catalog unless
    you give one. `--utilization` is the share of paid GPU time spent working. Buying is priced
    from the workload's purchase_usd_per_gpu, amortization_months, ops_usd_per_month, pue and
    usd_per_kwh (set them with --set; defaults in docs/cost.md).
    """
    from gpuwise.perf.cost import compare_gpus, estimate_cost
    from gpuwise.perf.tco import tco_for
    from gpuwise.report import cost_view, tco_view

    one_format(as_json, as_markdown)  # before the work, not after it
    usd_per_hour = alias_value(
        "--usd-per-gpu-hour", usd_per_gpu_hour, None, "--usd-per-hour", old_usd_per_hour
    )

    if all_gpus:
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
        return
    if budget is not None:
        workload = workload.with_changes(monthly_budget_usd=budget)
    estimate = estimate_cost(
        workload,
        usd_per_gpu_hour=usd_per_hour,
        api_usd_per_mtok=api_usd_per_mtok,
        cooling_overhead_pct=cooling_overhead,
        usd_per_kwh=usd_per_kwh,
    )
    from gpuwise.plan.input_checks import input_warnings
    from gpuwise.report.document import Bullets, Document, Heading
    from gpuwise.report.serving_view import figures_lines
    from gpuwise.serving.summary import serving_figures  # one truth with memory and plan

    run_s = estimate.training.run_time_s if estimate.training is not None else None
    for line in input_warnings(workload, run_time_s=run_s):
        typer.echo(f"gpuwise: warning: {line}", err=True)
    tco = tco_for(workload, estimate.perf, usd_per_gpu_hour=usd_per_hour)
    tco_doc = tco_view.document(tco)
    figures = serving_figures(workload)
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
