"""The CLI contract for options (issue #25, item 6): every number finite and in range, every output path
writable, every option with a metavar that says what it takes — checked before any work starts.

``install(command)`` walks the Click tree Typer builds and gives every numeric option a check from one
table (``OPTION_LIMITS``; a workload flag uses its field's limit from ``gpuwise.workload.limits``), every
output path a writability check, and every option a meaningful metavar. A bad value raises
``GpuwiseError``: ``cli/app.py`` prints it as one line and exits 2, before the command body runs.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuwise.cli.help_examples import EXAMPLES
from gpuwise.errors import GpuwiseError
from gpuwise.workload.limits import FIELD_LIMITS, SERVING_LIMITS, Limit

__all__ = [
    "METAVARS",
    "OPTION_LIMITS",
    "OUTPUT_PATHS",
    "alias_value",
    "check_output_file",
    "check_store",
    "install",
    "limit_for",
    "numeric_params",
]

_MILLION = 1_000_000
_SECONDS_CAP = 3600.0  # a load level, a request timeout: an hour at most

# "COMMAND --option" (or "--option" for every command) -> its range and unit.
OPTION_LIMITS: dict[str, Limit] = {
    "memory --headroom": Limit(0, 100, "% of GPU memory", open_high=True),
    "fit --headroom": Limit(0, 100, "% of GPU memory", open_high=True),
    "cost --usd-per-gpu-hour": FIELD_LIMITS["usd_per_gpu_hour"],
    "cost --api-usd-per-mtok": Limit(0, 10_000, "$ per 1M tokens", open_low=True),
    "cost --cooling-overhead": Limit(0, 400, "%"),
    "--usd-per-kwh": FIELD_LIMITS["usd_per_kwh"],
    "cost --budget": FIELD_LIMITS["monthly_budget_usd"],
    "--usd-per-gpu-hour": FIELD_LIMITS["usd_per_gpu_hour"],
    "profile --steps": Limit(1, _MILLION, "steps"),
    "profile --warmup": Limit(0, _MILLION, "steps"),
    "profile --interval": Limit(0.05, _SECONDS_CAP, "seconds"),
    "doctor --steps": Limit(8, _MILLION, "steps"),
    "doctor --warmup": Limit(0, _MILLION, "steps"),
    "trace --top": Limit(1, 100, "kernels"),
    "exporter --top-processes": Limit(0, 1000, "pid series per GPU"),
    "trace --rank": Limit(0, _MILLION),
    "trace --workers": Limit(1, 1024, "worker processes"),
    "loadtest --duration": Limit(0, _SECONDS_CAP, "seconds", open_low=True),
    "loadtest --timeout": Limit(0, _SECONDS_CAP, "seconds", open_low=True),
    "loadtest --length-spread": Limit(0, 1, open_high=True),
    "loadtest --max-requests": Limit(1, 100_000, "requests"),
    "loadtest --prompt-tokens": FIELD_LIMITS["seq_len"],
    "loadtest --output-tokens": FIELD_LIMITS["output_len"],
    "loadtest --seed": SERVING_LIMITS["seed"],
    "loadtest --max-probes": Limit(1, 20, "load levels"),
    "loadtest --probe-repeats": Limit(1, 10, "seeds per probed rate"),
    "bench --batch-size": FIELD_LIMITS["batch_size"],
    "bench --workers": Limit(0, 1024, "workers"),
    "tune --steps": Limit(1, _MILLION, "steps"),
    "tune --warmup": Limit(0, _MILLION, "steps"),
    "tune --time-budget": Limit(1, _MILLION, "seconds"),
    "tune --budget": Limit(1, _MILLION, "seconds"),
    "cost --usd-per-hour": FIELD_LIMITS["usd_per_gpu_hour"],
    "tune --repeats": Limit(0, 100),
    "tune --repeat-best": Limit(1, 100, "candidates"),
    "tune --max-trials": Limit(1, 10_000, "trials"),
    "tune --loss-rtol": Limit(0, 1),
    "runs list --limit": Limit(1, _MILLION, "runs"),
}

# Workload flags whose parameter name is not the field's name.
_FLAG_FIELDS = {"serving_rate": ("rate_rps", SERVING_LIMITS)}
_PREFIX_HIT = Limit(0, 1, "(share of prompt tokens)", open_high=True)

# Output paths: written by the command, so checked before it measures anything.
OUTPUT_PATHS = ("--html", "--output")
_STORE_READERS = ("runs list", "runs show", "runs compare", "monitor report", "plan")

# Option -> metavar (what a value looks like); the type decides for the rest (_default_metavar).
METAVARS: dict[str, str] = {
    "--store": "FILE",
    "--html": "FILE",
    "--output": "FILE",
    "--dataset": "FILE",
    "--tokenizer": "FILE",
    "--predict": "WORKLOAD",
    "--config": "FILE",
    "--web-config": "FILE",
    "--gpus-file": "FILE",
    "--models-file": "FILE",
    "--data": "PATH",
    "--rate": "REQ/S",
    "--concurrency": "N",
    "--rate-range": "LOW,HIGH",
    "--slo": "METRIC=SECONDS,...",
    "--duration": "SECONDS",
    "--timeout": "SECONDS",
    "--interval": "SECONDS",
    "--time-budget": "SECONDS",
    "--headroom": "PCT",
    "--utilization": "PCT",
    "--cooling-overhead": "PCT",
    "--usd-per-gpu-hour": "USD/GPU-H",
    "--usd-per-kwh": "USD/KWH",
    "--api-usd-per-mtok": "USD/1M-TOK",
    "--budget": "USD/MONTH",
    "--model": "MODEL",
    "--gpu": "GPU",
    "--gpus": "N",
    "--batch": "N",
    "--seq": "TOKENS",
    "--output-len": "TOKENS",
    "--prompt-tokens": "TOKENS",
    "--output-tokens": "TOKENS",
    "--image-size": "PIXELS",
    "--image-width": "PIXELS",
    "--set": "KEY=VALUE",
    "--evidence": "FILE|RUN",
    "--calibrate": "RUN",
    "--show": "RUN",
    "--listen": "HOST:PORT",
    "--since": "DURATION",
    "--until": "TIME",
    "--step": "DURATION",
    "--keep-raw": "DURATION",
    "--keep-minute": "DURATION",
    "--keep-hour": "DURATION",
    "--prometheus": "URL",
    "--api-key-env": "ENV-VAR",
    "--model-factory": "MODULE:FUNC",
    "--input-factory": "MODULE:FUNC",
    "--select": "RULE",
    "--ignore": "RULE",
    "--compare": "TRACE",
}


def alias_value(name: str, value: Any, default: Any, old_name: str, old_value: Any) -> Any:
    """The value of an option that has an old, hidden spelling: either one, never both."""
    if old_value is None:
        return value
    if value != default:
        raise GpuwiseError(f"{name} and {old_name} are the same option: give it once, as {name}")
    return old_value


def limit_for(command_path: str, param: Any) -> Limit | None:
    """The range of a numeric option: the command's row, the option's row for every command, or the
    workload field it sets (workload flags are named after their field)."""
    opt = _long_name(param)
    row = OPTION_LIMITS.get(f"{command_path} {opt}") or OPTION_LIMITS.get(opt)
    if row is not None:
        return row
    name = str(param.name or "")
    if name in _FLAG_FIELDS:
        field, table = _FLAG_FIELDS[name]
        return table[field]
    if name == "serving_prefix_hit_rate":
        return _PREFIX_HIT
    return FIELD_LIMITS.get(name)


def _long_name(param: Any) -> str:
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
    return opts[0] if opts else str(param.name)


def _is_numeric(param: Any) -> bool:
    base = getattr(param.type, "name", "")
    return base in ("float", "int", "integer") or base.endswith("range")


def numeric_params(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """(command path, parameter) of every numeric option under ``command`` (a Click group or command)."""
    subs = getattr(command, "commands", None)
    if subs is not None:
        return [pair for name, sub in subs.items() for pair in numeric_params(sub, (*path, name))]
    return [(" ".join(path), p) for p in command.params if _is_numeric(p)]


def _number_check(opt: str, limit: Limit | None) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is None:
                continue
            if limit is not None:
                problem = limit.problem(opt, item)
            elif isinstance(item, float) and not math.isfinite(item):
                problem = f"{opt} must be a finite number, got {item!r}"
            else:
                problem = None
            if problem:
                raise GpuwiseError(problem)

    return check


def check_output_file(path: Path | str, opt: str) -> Path:
    """An output file the command will write: not a directory, its folder exists and is writable."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise GpuwiseError(f"{opt} {path} is a directory: give a file name such as {path / 'report.html'}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise GpuwiseError(f"{opt} {path}: directory {folder} does not exist (create it first)")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise GpuwiseError(f"{opt} {path} is not writable: choose another file")
    return path


def check_store(path: Path | str, opt: str, *, reading: bool) -> Path:
    """A run or history store: a reader needs the file to exist; a writer needs it creatable (its
    nearest existing folder writable: the store makes the folders below it)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise GpuwiseError(f"{opt} {path} is a directory: give a file path such as {path / 'runs.sqlite'}")
    if reading:
        if not path.is_file():
            raise GpuwiseError(f"{opt} {path}: no store there (a command that saves runs creates it)")
        return path
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise GpuwiseError(f"{opt} {path}: {folder} is not a writable directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise GpuwiseError(f"{opt} {path} is not writable: choose another file")
    return path


def _chain(param: Any, check: Callable[[Any], None]) -> None:
    """Run ``check(value)`` before the option's own callback."""
    original = param.callback

    def callback(ctx: Any, p: Any, value: Any) -> Any:
        check(value)
        return original(ctx, p, value) if original is not None else value

    param.callback = callback


def _path_check(command_path: str, opt: str) -> Callable[[Any], None] | None:
    if opt == "--store":
        reading = command_path in _STORE_READERS

        def store(value: Any) -> None:
            if value is not None:
                check_store(value, opt, reading=reading)

        return store
    if opt in OUTPUT_PATHS:

        def output(value: Any) -> None:
            if value is not None and str(value) != "-":
                check_output_file(value, opt)

        return output
    return None


def _default_metavar(param: Any) -> str | None:
    kind = getattr(param.type, "name", "")
    if kind in ("float",) or kind == "float range":
        return "NUMBER"
    if kind in ("int", "integer") or kind.endswith("range"):
        return "N"
    if kind in ("path", "file", "directory"):
        if not getattr(param.type, "file_okay", True) or kind == "directory":
            return "DIR"
        return "FILE" if kind == "file" or not getattr(param.type, "dir_okay", True) else "PATH"
    if kind in ("text", "str", "string"):
        return "TEXT"
    return None


def _labelled(param: Any) -> None:
    """An argument's type column says what it takes (``TEXT``, ``FILE``…), not ``<str>``."""
    if param.metavar is None:
        param.metavar = str(param.name).upper()  # usage line: RUN_ID, not {run_id}:TEXT
    label = _default_metavar(param)
    if label is None or param.type.get_metavar(param=param, ctx=None) is not None:
        return
    named = copy.copy(param.type)
    named.get_metavar = lambda param, ctx=None: label  # this argument's copy only
    param.type = named


def _add_example(command: Any, command_path: str) -> None:
    examples = EXAMPLES.get(command_path)
    if examples and not command.epilog:
        command.epilog = "Examples:\n\n" + "\n\n".join(f"  {line}" for line in examples)


def install(command: Any, path: tuple[str, ...] = ()) -> Any:
    """Add the number, path and metavar contract to every option under ``command`` and its example to
    its help; returns it."""
    subs = getattr(command, "commands", None)
    command_path = " ".join(path)
    _add_example(command, command_path)
    if subs is not None:
        for name, sub in subs.items():
            install(sub, (*path, name))
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") == "argument":
            _labelled(param)
        if getattr(param, "param_type_name", "") != "option" or getattr(param, "is_flag", False):
            continue
        opt = _long_name(param)
        if _is_numeric(param):
            _chain(param, _number_check(opt, limit_for(command_path, param)))
        check = _path_check(command_path, opt)
        if check is not None:
            _chain(param, check)
        if param.metavar is None:
            param.metavar = METAVARS.get(opt) or _default_metavar(param)
    return command
