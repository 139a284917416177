"""`gpuwise plan`: the six-part optimization plan for a workload, with hardware options."""

# No `from __future__ import annotations`: @workload_command hands these annotations to Typer as objects.
from pathlib import Path
from typing import Annotated

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit, one_format
from gpuwise.cli.sim_extra import sim_extra_required
from gpuwise.cli.workload_flags import workload_command
from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload

__all__ = ["plan"]


@workload_command
def plan(
    workload: Workload,
    evidence: Annotated[
        list[str] | None,
        typer.Option(
            "--evidence",
            "-e",
            help="Measured evidence: --json output of `gpuwise profile`, `gpuwise trace`, `gpuwise runs` or "
            "`gpuwise loadtest`, or a load test's run id / 'last' (repeatable).",
        ),
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option("--store", help="Run store holding --evidence run ids (default: GPUWISE_STORE)."),
    ] = None,
    traced: Annotated[
        bool,
        typer.Option(
            "--traced",
            help="VRAM of the current configuration from a traced simulation of the real model "
            "(needs torch; pip install 'gpuwise\\[sim]').",
        ),
    ] = False,
    model_factory: Annotated[
        str | None,
        typer.Option(
            "--model-factory",
            help="With --traced: module:function (or file.py:function) that builds your model.",
        ),
    ] = None,
    input_factory: Annotated[
        str | None,
        typer.Option("--input-factory", help="With --traced: module:function that builds one input batch."),
    ] = None,
    html: HtmlFlag = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
) -> None:
    """Diagnosis, ranked techniques, config changes, VRAM, scaling and tools, each with a predicted number.

    Every technique's impact is the memory and performance models re-run on the changed workload.
    Ranked for the workload's goal (--goal cost | latency | throughput | fit).
    """
    from gpuwise.plan import make_plan
    from gpuwise.report import plan_view

    one_format(as_json, as_markdown)  # before the work, not after it

    from gpuwise.plan.serving import wants_serving_plan

    measured = _serving_evidence(evidence or [], store)
    if wants_serving_plan(workload) and not traced and (measured is not None or not evidence):
        from gpuwise.cli.serving_plan import emit_serving_plan

        return emit_serving_plan(workload, html, as_json, as_markdown, measured or [])
    if measured is not None:
        raise GpuwiseError(
            "a load test calibrates a serving plan: give the workload a demand (serving.rate or --rate)"
            + (" and drop --traced" if traced else "")
        )
    if (model_factory or input_factory) and not traced:
        raise GpuwiseError("--model-factory / --input-factory only apply with --traced")
    with sim_extra_required():
        result = make_plan(
            workload,
            evidence_files=[Path(e) for e in evidence or ()],
            traced=traced,
            model_factory=model_factory,
            input_factory=input_factory,
        )
    emit(
        {"plan": result.to_dict()},
        "plan",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: plan_view.plan_document(result),
    )


def _serving_evidence(refs: list[str], store: Path | None):
    """The --evidence items when any is a load test (a run id or a loadtest --json file), else None."""
    if not refs:
        return None
    from gpuwise.plan.serving_evidence import has_loadtest, is_run_ref, read_serving_evidence

    if not any(is_run_ref(r) for r in refs):
        from gpuwise.plan.evidence_sources import read_evidence_files

        loaded = read_evidence_files(refs)
        return loaded if has_loadtest(loaded) else None
    return read_serving_evidence(refs, store)
