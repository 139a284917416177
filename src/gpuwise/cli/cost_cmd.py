"""`gpuwise cost`: what a workload costs to train or serve, and when self-hosting beats an API."""

# No `from __future__ import annotations`: @workload_command hands these annotations to Typer as objects.
from typing import Annotated, Any

import typer

from gpuwise.cli.output import emit, one_format
from gpuwise.cli.workload_flags import workload_command
from gpuwise.workload import Workload


@workload_command
def cost(
    workload: Workload,
    usd_per_hour: Annotated[
        float | None, typer.Option("--usd-per-hour", help="Your $/GPU-hour (overrides the catalog).")
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
    all_gpus: Annotated[
        bool, typer.Option("--all-gpus", help="Compare the same workload on every catalog GPU.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (schema in docs/json-schema.md).")
    ] = False,
    as_markdown: Annotated[bool, typer.Option("--markdown", help="Print Markdown.")] = False,
) -> None:
    """Time and $ of a training run, $ per 1M tokens served, energy, and the API break-even.

    Speed comes from the performance model (`gpuwise.perf`); prices from the GPU catalog unless
    you give one. `--utilization` is the share of paid GPU time spent working.
    """
    from gpuwise.perf.cost import compare_gpus, estimate_cost
    from gpuwise.report import cost_view

    one_format(as_json, as_markdown)  # before the work, not after it

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
            lambda c: cost_view.render_comparison(c, rows, title, training, vision),
            lambda: cost_view.markdown_comparison(rows, title, training, vision),
            as_markdown,
        )
        return
    estimate = estimate_cost(
        workload,
        usd_per_gpu_hour=usd_per_hour,
        api_usd_per_mtok=api_usd_per_mtok,
        cooling_overhead_pct=cooling_overhead,
        usd_per_kwh=usd_per_kwh,
    )
    from gpuwise.report.serving_view import figures_lines
    from gpuwise.serving.summary import serving_figures  # serving helper: one truth with memory and plan

    figures = serving_figures(workload)
    lines = figures_lines(figures.kv, figures.at_demand) if figures else []
    emit(
        {"cost": estimate.to_dict(), **({"serving": figures.to_dict()} if figures else {})},
        "cost",
        as_json,
        lambda c: _render_with_lines(c, estimate, lines),
        lambda: cost_view.markdown_cost(estimate) + "".join(f"- {x}\n" for x in lines),
        as_markdown,
    )


def _render_with_lines(console: Any, estimate: Any, lines: list[str]) -> None:
    """The cost view, then the serving lines shared with `memory` and `plan` (serving helper)."""
    from gpuwise.report import cost_view

    cost_view.render_cost(console, estimate)
    for line in lines:
        console.print(f"• {line}", markup=False)
