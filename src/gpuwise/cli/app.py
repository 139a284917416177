"""The `gpuwise` command: Typer app, global --debug, and the one-line error contract."""

from __future__ import annotations

import sys

import typer
import typer.main

from gpuwise._version import __version__
from gpuwise.cli import (
    bench_cmd,
    catalog_cmd,
    cost_cmd,
    lint_cmd,
    loadtest_cmd,
    memory_cmd,
    monitor_cmd,
    options,
    plan_cmd,
    profile_cmd,
    trace_cmd,
    tune_cmd,
)
from gpuwise.errors import GpuwiseError

__all__ = ["app", "main"]

app = typer.Typer(
    name="gpuwise",
    help="Find where your AI workload loses time and memory, fix it, then pick the GPU that fits.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every subcommand
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuwise {__version__}")
        raise typer.Exit()


def _add_catalog_file(kind: str, path: str | None) -> None:
    """Same as listing the file in GPUWISE_GPUS / GPUWISE_MODELS, for this invocation."""
    if not path:
        return
    import os

    var = f"GPUWISE_{kind.upper()}"
    os.environ[var] = os.pathsep.join(filter(None, [os.environ.get(var, ""), path]))


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
    gpus_file: str = typer.Option(
        None, "--gpus-file", help="Extra GPU catalog file (YAML/TOML) for this run."
    ),
    models_file: str = typer.Option(
        None, "--models-file", help="Extra model catalog file (YAML/TOML) for this run."
    ),
) -> None:
    _state["debug"] = debug
    _add_catalog_file("gpus", gpus_file)
    _add_catalog_file("models", models_file)


# Every command registers here, in this one style and in the order `gpuwise --help` lists them.
app.command("gpus")(catalog_cmd.gpus)
app.command("models")(catalog_cmd.models)
app.command("memory")(memory_cmd.memory)
app.command("fit")(memory_cmd.fit)
app.command("plan")(plan_cmd.plan)
app.command("cost")(cost_cmd.cost)
app.command("profile", context_settings=profile_cmd.PROFILE_CONTEXT)(profile_cmd.profile)
app.command("doctor")(profile_cmd.doctor)
app.add_typer(profile_cmd.runs_app, name="runs")
app.command("trace")(trace_cmd.trace)
app.command("lint")(lint_cmd.lint)
app.command("loadtest")(loadtest_cmd.loadtest)
app.add_typer(monitor_cmd.monitor_app, name="monitor")
app.command("exporter")(monitor_cmd.exporter)
app.command("bench")(bench_cmd.bench)
app.command("tune", context_settings=profile_cmd.PROFILE_CONTEXT)(tune_cmd.tune)


def _click_error(err: Exception) -> int:
    """A usage error from the option parser as one line (the contract), with the command's --help."""
    names = {cls.__name__ for cls in type(err).__mro__}
    if "UsageError" not in names or "NoArgsIsHelpError" in names:
        err.show()  # type: ignore[attr-defined]  # no arguments: the help is the answer
        return 2 if "UsageError" in names else int(err.exit_code)  # type: ignore[attr-defined]
    ctx = getattr(err, "ctx", None)
    where = ctx.command_path if ctx is not None else "gpuwise"
    message = " ".join(err.format_message().split())  # type: ignore[attr-defined]
    print(f"gpuwise: error: {message} (see `{where} --help`)", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit status 2."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        # Outside standalone mode click returns the code of `typer.Exit(code)` instead of exiting.
        command = options.install(typer.main.get_command(app))  # numbers, paths, metavars: cli/options.py
        code = command.main(args=argv, standalone_mode=False, prog_name="gpuwise")
        if isinstance(code, int) and code:
            sys.exit(code)
    except GpuwiseError as err:
        if debug:
            raise
        one_line = " ".join(part.strip() for part in str(err).splitlines() if part.strip())  # the contract
        print(f"gpuwise: error: {one_line}", file=sys.stderr)
        sys.exit(err.exit_code)
    except typer.Abort:
        print("gpuwise: aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("gpuwise: interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except Exception as err:  # click usage errors and anything unexpected
        # Newer typer vendors click (typer._click), older typer uses click itself: duck-type.
        if hasattr(err, "show") and hasattr(err, "exit_code"):
            sys.exit(_click_error(err))
        if debug:
            raise
        print(
            f"gpuwise: internal error: {type(err).__name__}: {err} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        sys.exit(1)
