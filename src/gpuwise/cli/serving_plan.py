"""`gpuwise plan` for a serving workload with a demand (``serving.rate``): the serving plan's output."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuwise.cli.output import emit
from gpuwise.workload import Workload


def emit_serving_plan(workload: Workload, html: Path | None, as_json: bool, as_markdown: bool) -> None:
    from gpuwise.plan.serving import plan_serving
    from gpuwise.report import serving_view

    result = plan_serving(workload)
    if html is not None:
        from gpuwise.report import html as html_report

        html_report.write(serving_view.serving_document(result), html)
    emit(
        {"plan": result.to_dict()},
        "plan",
        as_json,
        lambda c: serving_view.render(c, result),
        lambda: serving_view.markdown_text(result),
        as_markdown,
    )
    if html is not None and not as_json:
        typer.echo(f"HTML report written to {html}", err=True)
