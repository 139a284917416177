"""`gpuwise memory` and `gpuwise fit`: per-GPU memory of a workload, and every GPU it fits on."""

# No `from __future__ import annotations`: @workload_command hands these annotations to Typer as objects.
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit
from gpuwise.cli.sim_extra import sim_extra_required
from gpuwise.cli.workload_flags import workload_command
from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload

__all__ = ["fit", "memory"]


def _factory_names_the_model(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--model-factory` goes into the workload (``model_factory``): a factory run needs no catalog model."""

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        factory = kwargs.get("model_factory")
        if factory:
            kwargs["set_values"] = [*(kwargs.get("set_values") or []), f"model_factory={factory}"]
        return command(**kwargs)

    return wrapper


@_factory_names_the_model
@workload_command
def memory(
    workload: Workload,
    max_batch: Annotated[
        bool, typer.Option("--max-batch", help="Also find the largest batch that fits with --headroom free.")
    ] = False,
    max_seq: Annotated[
        bool,
        typer.Option(
            "--max-seq", help="Also find the longest sequence/context that fits with --headroom free."
        ),
    ] = False,
    headroom: Annotated[
        float,
        typer.Option("--headroom", help="Percent of GPU memory to keep free for --max-batch/--max-seq."),
    ] = 10.0,
    traced: Annotated[
        bool,
        typer.Option(
            "--traced", help="Simulate one step on fake tensors (needs torch; pip install 'gpuwise\\[sim]')."
        ),
    ] = False,
    model_factory: Annotated[
        str | None,
        typer.Option(
            "--model-factory",
            help="With --traced: pkg.module:function or file.py:function building the model.",
        ),
    ] = None,
    input_factory: Annotated[
        str | None,
        typer.Option("--input-factory", help="With --traced: function building one batch of inputs."),
    ] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Per-GPU memory: breakdown by component, the phase that sets the peak, allocated/reserved/nvidia-smi.

    The analytic estimate never imports torch. `--traced` runs the real model on fake tensors instead.
    """
    if not 0 <= headroom < 100:
        raise GpuwiseError(f"--headroom must be between 0 and 100 percent, got {headroom}")
    if (model_factory or input_factory) and not traced:
        raise GpuwiseError("--model-factory and --input-factory need --traced")
    model_factory = model_factory or workload.model_factory or None
    if not workload.model and not traced:
        raise GpuwiseError(
            f"the analytic estimate needs a catalog model or a config.json; a model factory "
            f"({model_factory}) runs only with --traced"
        )
    if traced:
        if max_batch or max_seq:
            raise GpuwiseError("--max-batch and --max-seq use the analytic estimate; drop --traced for them")
        _traced(workload, model_factory, input_factory, as_json, as_markdown, html)
        return
    from gpuwise.memory import estimate_memory
    from gpuwise.memory.result import memory_report
    from gpuwise.plan.input_checks import input_warnings
    from gpuwise.report import memory_view
    from gpuwise.serving.summary import serving_figures  # serving helper: one KV truth with cost and plan

    estimate = estimate_memory(workload)
    for line in input_warnings(workload, peak_bytes=estimate.device_total_bytes):
        typer.echo(f"gpuwise: warning: {line}", err=True)
    report = memory_report(
        workload,
        estimate,
        max_batch=max_batch,
        max_seq=max_seq,
        headroom_pct=headroom,
        serving=serving_figures(workload),
    )
    emit(
        report.to_dict(),
        "memory",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: memory_view.estimate_document(report),
    )


def _traced(
    workload: Workload,
    model_factory: str | None,
    input_factory: str | None,
    as_json: bool,
    as_markdown: bool,
    html: Path | None,
) -> None:
    """`memory --traced`: one step of the real model on fake tensors (torch, the sim extra)."""
    with sim_extra_required():
        from gpuwise.simulation import traced_estimate

        result = traced_estimate(workload, model_factory=model_factory, input_factory=input_factory)
    from gpuwise.report import simulation_view

    emit(
        result.to_dict(),
        "memory_traced",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: simulation_view.traced_document(result),
    )


@workload_command
def fit(
    workload: Workload,
    headroom: Annotated[
        float, typer.Option("--headroom", help="Only list GPUs that keep at least this percent free.")
    ] = 0.0,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Every catalog GPU, at 1/2/4/8 GPUs, on which the workload fits — with its headroom, sorted."""
    from gpuwise.memory import fit_table
    from gpuwise.report import memory_view

    result = fit_table(workload, min_headroom_pct=headroom)
    emit(
        result.to_dict(),
        "fit",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: memory_view.fit_document(result),
    )
