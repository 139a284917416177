"""`gpuwise profile`, `gpuwise doctor` and `gpuwise runs list|show|compare`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit, one_format
from gpuwise.errors import GpuwiseError

__all__ = [
    "PROFILE_CONTEXT",
    "StoreOpt",
    "doctor",
    "profile",
    "runs_app",
    "runs_compare",
    "runs_list",
    "runs_show",
]

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="Run store (SQLite file). Default: the user data dir, or $GPUWISE_STORE.",
        dir_okay=False,
    ),
]

runs_app = typer.Typer(
    help="List, show and compare profiled runs (the SQLite run store).", no_args_is_help=True
)

PROFILE_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}


def profile(
    ctx: typer.Context,
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            min=1,
            help="Steps to measure after warm-up (a step ends at each optimizer step).",
        ),
    ] = 50,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", "-w", min=0, help="Steps to run before measuring (compile, caches, worker start)."
        ),
    ] = 5,
    stop: Annotated[
        bool,
        typer.Option(
            "--stop", help="End the script once the steps are measured (default: detach and let it finish)."
        ),
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.05, help="Telemetry sampling interval, seconds.")
    ] = 0.5,
    store: StoreOpt = None,
    save: Annotated[bool, typer.Option("--save/--no-save", help="Save the run in the run store.")] = True,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Profile a training script, unchanged: [bold]gpuwise profile -- python train.py ARGS[/bold]

    Splits every step into data wait, host→device copy, forward, backward, optimizer and the rest;
    samples CPU/GPU telemetry; names what limits the run with the fix. Works under torchrun too
    (one run per rank). The script's exit code is gpuwise's exit code."""
    from gpuwise.profile.launcher import run_profiled
    from gpuwise.report import profile_view

    one_format(as_json, as_markdown)  # before the work, not after it
    if ctx.args and ctx.args[0].startswith("-"):  # unknown options land in ctx.args (see PROFILE_CONTEXT)
        raise GpuwiseError(
            f"gpuwise profile has no option {ctx.args[0]}; the script's command goes after -- "
            "(gpuwise profile --help)"
        )
    session = run_profiled(
        list(ctx.args),
        steps=steps,
        warmup=warmup,
        stop=stop,
        interval_s=interval,
        stdout_to_stderr=as_json or as_markdown,
        store=store,
        save=save,
    )
    emit(
        session.to_dict(),
        "profile",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: profile_view.session_document(session),
    )
    if session.exit_code:
        sys.exit(session.exit_code)  # the script's exit code is ours (click would swallow typer.Exit here)


def doctor(
    steps: Annotated[
        int, typer.Option("--steps", min=8, help="Steps measured in each of the two runs.")
    ] = 40,
    warmup: Annotated[
        int, typer.Option("--warmup", "-w", min=0, help="Warm-up steps before each measurement.")
    ] = 3,
    device: Annotated[str, typer.Option("--device", help="auto | cpu | cuda")] = "auto",
    store: StoreOpt = None,
    save: Annotated[bool, typer.Option("--save/--no-save", help="Save both runs in the run store.")] = True,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Profile a built-in training workload, apply the fixes its findings call for, measure the speed-up.

    It is `gpuwise tune` on that workload: each run a fresh profiled process."""
    from gpuwise.cli.tune_cmd import trial_progress
    from gpuwise.doctor.run import run_doctor
    from gpuwise.report import profile_view

    one_format(as_json, as_markdown)
    result = run_doctor(
        steps=steps, warmup=warmup, device=device, store=store if save else False, progress=trial_progress()
    )
    emit(
        result.to_dict(),
        "doctor",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: profile_view.doctor_document(result),
    )


@runs_app.command("list")
def runs_list(
    limit: Annotated[int, typer.Option("--limit", min=1, help="Newest N runs.")] = 30,
    store: StoreOpt = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """List saved runs, newest first."""
    from gpuwise.report import profile_view
    from gpuwise.store.runs import RunStore, default_store_path

    path = store or default_store_path()
    if not Path(path).exists():
        rows, shown = [], str(path)
    else:
        with RunStore.open(path, create=False) as runs:
            rows, shown = runs.list(limit), str(runs.path)
    emit(
        {"store": shown, "runs": [r.to_dict() for r in rows]},
        "runs",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: profile_view.runs_list_document(rows, shown),
    )


# `runs show -2`: a negative offset is a run, not an unknown option.
_NEGATIVE_IDS = {"ignore_unknown_options": True}


@runs_app.command("show", context_settings=_NEGATIVE_IDS)
def runs_show(
    run_id: Annotated[str, typer.Argument(help="Run id, 'last', or -N for the N-th newest.")],
    store: StoreOpt = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Show one saved run of any kind (profile, tune, tune trial, load test, bench); a profiled run's
    `--json` output is accepted by `gpuwise plan --evidence`."""
    from gpuwise.profile.saved_runs import load_run
    from gpuwise.report import profile_view
    from gpuwise.store.runs import RunStore

    with RunStore.open(store, create=False) as runs:
        found = runs.kind_and_document(runs.resolve(run_id))
        if found is not None and found[0] not in ("profile", "tune-trial"):
            from gpuwise.cli.saved_run_view import emit_saved

            return emit_saved(runs.resolve(run_id), *found, as_json, as_markdown, html)
        run = load_run(runs, run_id)
    emit(
        run.to_dict(),
        "run",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: profile_view.run_document(run),
    )


@runs_app.command("compare", context_settings=_NEGATIVE_IDS)
def runs_compare(
    a: Annotated[str, typer.Argument(help="The baseline run (id, 'last', -N).")],
    b: Annotated[str, typer.Argument(help="The run to compare with it.")],
    store: StoreOpt = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Compare two runs: steps/s, each phase, changed settings, findings resolved and new."""
    from gpuwise.profile.run_comparison import compare_runs
    from gpuwise.profile.saved_runs import load_run
    from gpuwise.report import profile_view
    from gpuwise.store.runs import RunStore

    with RunStore.open(store, create=False) as runs:
        run_a, run_b = load_run(runs, a), load_run(runs, b)
    if run_a.run_id == run_b.run_id:
        raise GpuwiseError(f"both arguments name run {run_a.run_id}; give two different runs")
    cmp = compare_runs(run_a, run_b)
    emit(
        cmp.to_dict(),
        "run_comparison",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: profile_view.comparison_document(cmp),
    )
