"""The `gpuwise` command: Typer app, global --debug, and the one-line error contract."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer
import typer.main

from gpuwise._version import __version__
from gpuwise.cli import options
from gpuwise.cli.light_help import light_rich_help, wants_help
from gpuwise.errors import GpuwiseError

__all__ = ["COMMANDS", "build_app", "main"]  # and `app`, built on first access (module __getattr__)

# Every command registers here, in this one style and in the order `gpuwise --help` lists them:
# (name, module in gpuwise.cli, attribute, "command" or "group" (a Typer sub-app), profile-style context).
# The modules are imported only for the commands a run needs: `gpuwise trace ...` does not import the
# planner, the catalog or the diagnosis engine just to register their commands (start-up time).
COMMANDS: tuple[tuple[str, str, str, str, bool], ...] = (
    ("gpus", "catalog_cmd", "gpus", "command", False),
    ("models", "catalog_cmd", "models", "command", False),
    ("memory", "memory_cmd", "memory", "command", False),
    ("fit", "memory_cmd", "fit", "command", False),
    ("plan", "plan_cmd", "plan", "command", False),
    ("cost", "cost_cmd", "cost", "command", False),
    ("profile", "profile_cmd", "profile", "command", True),
    ("doctor", "profile_cmd", "doctor", "command", False),
    ("runs", "profile_cmd", "runs_app", "group", False),
    ("trace", "trace_cmd", "trace", "command", False),
    ("lint", "lint_cmd", "lint", "command", False),
    ("loadtest", "loadtest_cmd", "loadtest", "command", False),
    ("monitor", "monitor_cmd", "monitor_app", "group", False),
    ("exporter", "monitor_cmd", "exporter", "command", False),
    ("bench", "bench_cmd", "bench", "command", False),
    ("tune", "tune_cmd", "tune", "command", True),
)
_GLOBAL_VALUE_OPTIONS = ("--gpus-file", "--models-file")
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


def build_app(only: str | None = None) -> typer.Typer:
    """The Typer app with every command, or with the one command `only` (what a run of it needs)."""
    built = typer.Typer(
        name="gpuwise",
        help="Find where your AI workload loses time and memory, fix it, then pick the GPU that fits.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every subcommand
    )
    built.callback()(_root)
    for name, module_name, attribute, kind, profile_context in COMMANDS:
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"gpuwise.cli.{module_name}")
        target = getattr(module, attribute)
        if kind == "group":
            built.add_typer(target, name=name)
        elif profile_context:
            context = importlib.import_module("gpuwise.cli.profile_cmd").PROFILE_CONTEXT
            built.command(name, context_settings=context)(target)
        else:
            built.command(name)(target)
    return built


def _command_named(argv: list[str]) -> str | None:
    """The subcommand the arguments name (after the global options), if it is one of COMMANDS."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in _GLOBAL_VALUE_OPTIONS:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return arg if any(arg == c[0] for c in COMMANDS) else None
    return None


def __getattr__(name: str) -> Any:
    """`app`, the full command tree, is built on first use (tests and documentation import it)."""
    if name == "app":
        built = build_app()
        globals()["app"] = built
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    args = argv if argv is not None else sys.argv[1:]
    if wants_help(args):
        with light_rich_help():  # the help screen without Rich's Markdown and traceback (start-up)
            _run(argv, args)
    else:
        _run(argv, args)


def _run(argv: list[str] | None, args: list[str]) -> None:
    """Build the tree the run needs and run it; every error becomes the one-line contract."""
    debug = "--debug" in args
    try:
        # Outside standalone mode click returns the code of `typer.Exit(code)` instead of exiting.
        # Once `app` is built (imported by a test or a plug-in), it is the tree; else only what the run needs.
        tree = globals().get("app") or build_app(_command_named(args))
        command = options.install(typer.main.get_command(tree))  # numbers, paths, metavars: cli/options.py
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
