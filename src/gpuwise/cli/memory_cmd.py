"""`gpuwise memory` and `gpuwise fit`: per-GPU memory of a workload, and every GPU it fits on."""

# No `from __future__ import annotations`: @workload_command hands these annotations to Typer as objects.
import functools
from collections.abc import Callable
from typing import Annotated, Any

import typer

from gpuwise.cli.output import emit
from gpuwise.cli.sim_extra import sim_extra_required
from gpuwise.cli.workload_flags import workload_command
from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (schema in docs/json-schema.md).")]


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
) -> None:
    """Per-GPU memory: breakdown by component, the phase that sets the peak, allocated/reserved/nvidia-smi.

    The analytic estimate never imports torch. `--traced` runs the real model on fake tensors instead.
    """
    from gpuwise.report import memory_view

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
        with sim_extra_required():
            from gpuwise.simulation import traced_estimate

            result = traced_estimate(workload, model_factory=model_factory, input_factory=input_factory)
        from gpuwise.report import simulation_view

        emit(result.to_dict(), "memory_traced", as_json, lambda c: simulation_view.render_traced(c, result))
        return

    from gpuwise.memory import estimate_memory, max_batch_that_fits, max_seq_len_that_fits

    estimate = estimate_memory(workload)
    payload = estimate.to_dict()
    extras: dict = {}
    if max_batch:
        n = max_batch_that_fits(workload, estimate.gpu, headroom_pct=headroom)
        extras["max_batch"] = {
            "value": n,
            "headroom_pct": headroom,
            "gpu": estimate.gpu.id,
            "text": (
                f"largest batch on {estimate.gpu.id} with {headroom:g} % headroom: [bold]{n}[/]"
                if n
                else f"[red]batch 1 does not fit {estimate.gpu.id} with {headroom:g} % headroom[/]"
            ),
        }
    if max_seq:
        n = max_seq_len_that_fits(workload, estimate.gpu, headroom_pct=headroom)
        what = "context (prompt)" if workload.is_inference else "sequence"
        extras["max_seq_len"] = {
            "value": n,
            "headroom_pct": headroom,
            "gpu": estimate.gpu.id,
            "text": (
                f"longest {what} on {estimate.gpu.id} with {headroom:g} % headroom: [bold]{n:,}[/] tokens"
                if n
                else f"[red]no {what} length fits {estimate.gpu.id} with {headroom:g} % headroom[/]"
            ),
        }
    from gpuwise.serving.summary import serving_figures  # serving helper: one KV truth with cost and plan

    figures = serving_figures(workload)
    if figures is not None:
        from gpuwise.report.serving_view import figures_lines

        extras["serving"] = {
            **figures.to_dict(),
            "text": "\n".join(figures_lines(figures.kv, figures.at_demand)),
        }
    for key, answer in extras.items():
        payload[key] = {k: v for k, v in answer.items() if k != "text"}
    emit(payload, "memory", as_json, lambda c: memory_view.render_estimate(c, estimate, extras))


@workload_command
def fit(
    workload: Workload,
    headroom: Annotated[
        float, typer.Option("--headroom", help="Only list GPUs that keep at least this percent free.")
    ] = 0.0,
    as_json: JsonFlag = False,
) -> None:
    """Every catalog GPU, at 1/2/4/8 GPUs, on which the workload fits — with its headroom, sorted."""
    from gpuwise.memory import fit_table
    from gpuwise.report import memory_view

    result = fit_table(workload, min_headroom_pct=headroom)
    emit(result.to_dict(), "fit", as_json, lambda c: memory_view.render_fit(c, result))
