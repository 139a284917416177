"""`gpuwise plan` for a serving workload with a demand (``serving.rate``): the serving plan's output."""

from __future__ import annotations

from pathlib import Path

from gpuwise.cli.output import emit
from gpuwise.workload import Workload


def emit_serving_plan(workload: Workload, html: Path | None, as_json: bool, as_markdown: bool) -> None:
    from gpuwise.plan.serving import plan_serving
    from gpuwise.report import serving_view

    result = plan_serving(workload)
    emit(
        {"plan": result.to_dict()},
        "plan",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: serving_view.serving_document(result),
    )
