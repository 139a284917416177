"""`gpuwise tune -- python train.py ARGS`: trials of the unchanged script, ranked by measured speed.
The work is in `gpuwise.tune`; this module parses flags, shows each trial on stderr and prints the result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.options import alias_value
from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit, one_format
from gpuwise.cli.profile_cmd import StoreOpt
from gpuwise.diagnose import thresholds as T
from gpuwise.errors import GpuwiseError, RunFailed

__all__ = ["trial_progress", "tune"]


def trial_progress() -> Any:
    """One line per trial on stderr (stdout stays clean for --json)."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False)

    def on_event(kind: str, item: Any, planned: int) -> None:
        if kind == "start":
            console.print(
                f"[dim]trial {item.index}/{max(planned, item.index)}[/] {item.role}: {item.label} …"
            )
            return
        rate = f"{item.steps_per_s:.2f} steps/s" if item.steps_per_s else ""
        samples = f", {item.samples_per_s:,.0f} samples/s" if item.samples_per_s else ""
        style = "green" if item.status == "ok" else "red"
        why = f" ({item.error})" if item.error else ""
        console.print(f"    [{style}]{item.status}[/] {rate}{samples} in {item.wall_s:.1f} s{why}")

    return on_event


def tune(
    ctx: typer.Context,
    knob: Annotated[
        list[str] | None,
        typer.Option(
            "--knob",
            help="Also try NAME=V1,V2 (num_workers, threads, autocast=bf16, …); one trial per value.",
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", help="The script's own flag: NAME=FLAG:V1,V2, e.g. batch_size=--batch-size:16,32,64."
        ),
    ] = None,
    accum: Annotated[
        str | None,
        typer.Option(
            "--accum", help="The script's accumulation flag (keeps the effective batch), or 'none'."
        ),
    ] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps measured per trial.")] = 20,
    warmup: Annotated[
        int, typer.Option("--warmup", "-w", min=0, help="Steps before measuring, per trial.")
    ] = 3,
    budget: Annotated[
        float,
        typer.Option(
            "--time-budget",
            min=1.0,
            metavar="SECONDS",
            help="Seconds per trial before it is stopped (hung if too few steps).",
        ),
    ] = 120.0,
    old_budget: Annotated[
        float | None, typer.Option("--budget", hidden=True, help="Old spelling of --time-budget.")
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            min=0,
            help="Rounds repeating the baseline and every candidate that could still win (0: none; "
            "they go on while one could, up to the larger of this and 4).",
        ),
    ] = 2,
    old_repeat_best: Annotated[
        int | None,
        typer.Option(
            "--repeat-best", min=1, hidden=True, help="No longer used: every contender is repeated."
        ),
    ] = None,
    max_trials: Annotated[int, typer.Option("--max-trials", min=1, help="Upper bound on trials.")] = 16,
    auto: Annotated[
        bool, typer.Option("--auto/--no-auto", help="Try the fixes the baseline's findings name.")
    ] = True,
    allow_numerics: Annotated[
        bool,
        typer.Option(
            "--allow-numerics", help="Let findings propose bf16 autocast (verified against the losses)."
        ),
    ] = False,
    target_gpu: Annotated[
        str | None,
        typer.Option(
            "--target-gpu", help="Simulate the --param batch sizes on this catalog GPU (needs --workload)."
        ),
    ] = None,
    workload: Annotated[
        Path | None,
        typer.Option(
            "--workload",
            help="Workload YAML describing the script's model, for --target-gpu.",
            dir_okay=False,
        ),
    ] = None,
    loss_rtol: Annotated[
        float, typer.Option("--loss-rtol", min=0.0, help="Relative loss tolerance for numerics knobs.")
    ] = T.TUNE_LOSS_RTOL,
    store: StoreOpt = None,
    save: Annotated[bool, typer.Option("--save/--no-save", help="Save every trial in the run store.")] = True,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Faster settings for a training script, unchanged: [bold]gpuwise tune -- python train.py[/bold]

    Runs short profiled trials of the script, each a fresh process (a crash or OOM never stops the
    tuner): the fixes its findings name, your --knob values and --param flags (batch kept effective
    with --accum), repeats the best, ranks by measured speed and prints the winner in the script's terms."""
    from gpuwise.report import tune_view
    from gpuwise.tune.knobs import parse_knob_option
    from gpuwise.tune.params import parse_param
    from gpuwise.tune.saved_sessions import save_tune
    from gpuwise.tune.search import TuneOptions, run_tune

    one_format(as_json, as_markdown)
    if ctx.args and ctx.args[0].startswith("-"):
        raise GpuwiseError(
            f"gpuwise tune has no option {ctx.args[0]}; the script's command goes after -- "
            "(gpuwise tune --help)"
        )
    if old_repeat_best is not None:
        typer.echo(
            "gpuwise: note: --repeat-best is no longer used: every configuration that could still win is "
            "repeated, round after round, until it separates from the baseline (--repeats, --max-trials)",
            err=True,
        )
    options = TuneOptions(
        steps=steps,
        warmup=warmup,
        budget_s=alias_value("--time-budget", budget, 120.0, "--budget", old_budget),
        repeats=repeats,
        max_trials=max_trials,
        knobs=[parse_knob_option(k) for k in knob or []],
        params=[parse_param(p) for p in param or []],
        accum=accum,
        auto=auto,
        allow_numerics=allow_numerics,
        loss_rtol=loss_rtol,
    )
    _simulate_target(options, target_gpu, workload)
    if save:
        from gpuwise.profile.launcher import check_store

        check_store(store)
    result = run_tune(list(ctx.args), options, on_event=trial_progress())
    ran = any(t.status == "ok" for t in result.trials)
    if save and result.trials and (ran or result.interrupted):  # a session that never ran has no verdict
        result.store = save_tune(result, store)
    emit(
        result.to_dict(),
        "tune",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: tune_view.tune_document(result),
    )
    _exit_status(result, ran)


def _exit_status(result, ran: bool) -> None:
    """128 + the signal when interrupted (as a shell reports it); 1 with the reason when no trial ran."""
    if result.interrupted:
        sys.exit(128 + (result.signal or 2))
    if not ran:
        raise RunFailed(result.notes[-1] if result.notes else "no trial ran: nothing to tune")
    crashed = [
        t
        for t in result.trials
        if t.status in ("crashed", "hung") and (t.spec.role == "baseline" or t.spec.repeat_of == 1)
    ]
    if crashed:  # the command as written failed: no verdict stands on it
        raise RunFailed(f"the command as written failed in trial {crashed[0].spec.index}: {crashed[0].error}")


def _simulate_target(options, target_gpu: str | None, workload: Path | None) -> None:
    """`--target-gpu` with `--workload`: simulate the --param batch sizes on that GPU before any trial."""
    if (target_gpu is None) != (workload is None):
        raise GpuwiseError(
            "--target-gpu and --workload go together: the simulator needs the model and the GPU"
        )
    if target_gpu is not None and workload is not None:
        batch = next((p for p in options.params if p.name == "batch_size"), None)
        if batch is None:
            raise GpuwiseError(
                "--target-gpu simulates the batch sizes of --param batch_size=FLAG:VALUES; give them"
            )
        from gpuwise.cli.sim_extra import sim_extra_required
        from gpuwise.tune.simulated import simulate_batches

        with sim_extra_required():
            options.simulated = simulate_batches(workload, target_gpu, [int(v) for v in batch.values])
        options.target_gpu = target_gpu
