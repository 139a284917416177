"""`gpuwise plan` for a serving workload with a demand (``serving.rate``): the serving plan's output."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwise.cli.output import emit
from gpuwise.workload import Workload

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.diagnose import Evidence

__all__ = ["emit_serving_plan"]


def emit_serving_plan(
    workload: Workload,
    html: Path | None,
    as_json: bool,
    as_markdown: bool,
    evidence: Sequence[Evidence] = (),
) -> None:
    """The serving plan (replicas, layout, latency and $ at the demand) through `emit` as a ``plan``."""
    from gpuwise.plan.serving import plan_serving
    from gpuwise.report import serving_view

    result = plan_serving(workload, evidence=evidence)
    emit(
        {"plan": result.to_dict()},
        "plan",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: serving_view.serving_document(result),
    )
