"""Fuzz the CLI contract (issue #25): every command's numeric options and every workload field.

Hypothesis draws option values — in range, at the edges of the range, and outside it (NaN, ±inf,
negative, zero, 10^12) — and runs the command in-process through `gpuwise.cli.app.main`. Whatever it
draws: no internal error, no traceback, no NaN/infinite/negative money in the output; a value outside
its documented range is refused with exit 2 and one line, never exit 0. Bounded and derandomized.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.cli import options
from gpuwise.cli.app import app, main
from gpuwise.workload.limits import FIELD_LIMITS, SERVING_LIMITS, Limit

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_COMMAND = typer.main.get_command(app)
_NUMERIC = options.numeric_params(_COMMAND)
# The positional part each command needs so that only the fuzzed option can be what is wrong.
_TAIL = {
    "profile": ["--", "true"],
    "tune": ["--", "true"],
    "trace": ["missing-trace.json"],
    "runs show": ["last"],
    "runs compare": ["-2", "-1"],
    "loadtest": ["http://127.0.0.1:9"],
    "memory": ["-m", "llama-3-8b"],
    "fit": ["-m", "llama-3-8b"],
    "plan": ["-m", "llama-3-8b"],
    "cost": ["-m", "llama-3-8b"],
}
_MONEY_TEXT = re.compile(r"\$\s*-\s*\d|-\s*\$\s*\d|\$\s*(nan|inf)|\b(nan|inf)\b", re.IGNORECASE)


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def _outside(limit: Limit, is_int: bool) -> st.SearchStrategy[str]:
    """Values the limit refuses, as the user would type them."""
    bad: list[Any] = [limit.high * 10 + 1, 10**12, -1]
    if limit.low > 0 or limit.open_low:
        bad += [limit.low - 1 if is_int else limit.low / 2 if limit.low > 0 else -0.5]
    if limit.open_low:
        bad.append(limit.low)
    if limit.open_high:
        bad.append(limit.high)
    if not is_int:
        bad += ["nan", "inf", "-inf", "NaN"]
    values = [v for v in bad if isinstance(v, str) or limit.problem("x", v) is not None]
    return st.sampled_from([str(int(v)) if is_int and not isinstance(v, str) else str(v) for v in values])


def _inside(limit: Limit, is_int: bool) -> st.SearchStrategy[str]:
    """Values the limit accepts: its edges and a few in between (bounded so a run stays short)."""
    low = limit.low if not limit.open_low else (limit.low + 1 if is_int else limit.low + 0.01)
    high = limit.high if not limit.open_high else limit.high - (1 if is_int else 0.01)
    if is_int:
        return st.integers(math.ceil(low), int(min(high, low + 64))).map(str) | st.sampled_from(
            [str(int(low)), str(int(high))]
        )
    return st.floats(low, min(high, low + 100), allow_nan=False).map(lambda v: f"{v:.6g}") | st.sampled_from(
        [f"{low:g}", f"{high:g}"]
    )


def _is_int(param: Any) -> bool:
    return getattr(param.type, "name", "").startswith("int")


def _refused_cleanly(code: int, out: str, err: str, argv: list[str]) -> None:
    lines = err.strip().splitlines()
    assert code == 2, f"refused input exited {code}: {argv}\n{err}"
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), (argv, err)


def _clean(code: int, out: str, err: str, argv: list[str]) -> None:
    """No internal error, no traceback, no bad money; exit 0, or 2 with one line."""
    assert "internal error" not in err and "Traceback" not in err + out, (argv, err)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        _refused_cleanly(code, out, err, argv)
        return
    text = out if not out.lstrip().startswith("{") else ""
    assert not _MONEY_TEXT.search(text), (argv, _MONEY_TEXT.search(text))
    if out.lstrip().startswith("{"):
        _check_money(json.loads(out), argv)


def _check_money(node: Any, argv: list[str], key: str = "") -> None:
    """Every $ figure in a JSON document is finite and not negative (``usd`` in its name)."""
    if isinstance(node, dict):
        for k, v in node.items():
            _check_money(v, argv, str(k))
    elif isinstance(node, list):
        for v in node:
            _check_money(v, argv, key)
    elif isinstance(node, float | int) and not isinstance(node, bool) and "usd" in key.lower():
        assert math.isfinite(node) and node >= 0, (argv, key, node)


# -- every command: a value outside its range is refused before any work -----------------------------------
@settings(FUZZ, max_examples=100)
@given(data=st.data())
def test_every_numeric_option_refuses_out_of_range_values(capsys, data):
    path, param = data.draw(st.sampled_from(_NUMERIC), label="option")
    limit = options.limit_for(path, param)
    assert limit is not None
    value = data.draw(_outside(limit, _is_int(param)), label="value")
    opt = options._long_name(param)
    argv = [*path.split(), f"{opt}={value}", *_TAIL.get(path, [])]
    code, out, err = _run(capsys, argv)
    assert "internal error" not in err and "Traceback" not in err, (argv, err)
    _refused_cleanly(code, out, err, argv)
    assert opt in err or "Invalid value" in err, (argv, err)


# -- workload fields (YAML keys, --set) ---------------------------------------------------------------------
_FIELDS = [(name, limit, "") for name, limit in FIELD_LIMITS.items()]
_FIELDS += [(name, limit, "serving.") for name, limit in SERVING_LIMITS.items()]
_FLOAT_FIELDS = {
    "utilization_pct",
    "train_tokens",
    "epochs",
    "usd_per_gpu_hour",
    "monthly_budget_usd",
    "purchase_usd_per_gpu",
    "amortization_months",
    "ops_usd_per_month",
    "pue",
    "usd_per_kwh",
    "rate_rps",
    "tokens_per_day",
}


@settings(FUZZ, max_examples=50)
@given(data=st.data())
def test_every_workload_field_refuses_out_of_range_values(capsys, data):
    name, limit, prefix = data.draw(st.sampled_from(_FIELDS), label="field")
    value = data.draw(_outside(limit, name not in _FLOAT_FIELDS), label="value")
    argv = ["memory", "-m", "llama-3-8b", "--set", f"{prefix}{name}={value}", "--json"]
    code, out, err = _run(capsys, argv)
    assert "internal error" not in err and "Traceback" not in err, (argv, err)
    _refused_cleanly(code, out, err, argv)
    assert name in err or "must be" in err, (argv, err)


# -- memory, fit, cost, plan: any mix of values runs cleanly or is refused cleanly --------------------------
_WORKLOAD_OPTS = {
    "--batch": FIELD_LIMITS["batch_size"],
    "--seq": FIELD_LIMITS["seq_len"],
    "--gpus": FIELD_LIMITS["num_gpus"],
    "--output-len": FIELD_LIMITS["output_len"],
    "--utilization": FIELD_LIMITS["utilization_pct"],
    "--concurrency": FIELD_LIMITS["concurrency"],
    "--accum": FIELD_LIMITS["grad_accum"],
}
_COST_OPTS = {
    "--usd-per-gpu-hour": FIELD_LIMITS["usd_per_gpu_hour"],
    "--usd-per-kwh": FIELD_LIMITS["usd_per_kwh"],
    "--budget": FIELD_LIMITS["monthly_budget_usd"],
    "--api-usd-per-mtok": options.OPTION_LIMITS["cost --api-usd-per-mtok"],
    "--cooling-overhead": options.OPTION_LIMITS["cost --cooling-overhead"],
}
_INT_OPTS = {"--batch", "--seq", "--gpus", "--output-len", "--concurrency", "--accum"}


def _value(data: st.DataObject, opt: str, limit: Limit) -> tuple[str, bool]:
    """(value, is it outside the range?) — mostly inside, sometimes outside."""
    outside = data.draw(st.booleans().map(lambda b: b and data.draw(st.integers(0, 3)) == 0), label="bad")
    strategy = _outside if outside else _inside
    return data.draw(strategy(limit, opt in _INT_OPTS), label=opt), outside


@settings(FUZZ, max_examples=30)
@given(data=st.data())
def test_workload_commands_never_crash_or_print_bad_money(capsys, data):
    command = data.draw(st.sampled_from(["memory", "fit", "cost", "cost", "plan"]), label="command")
    task = data.draw(st.sampled_from(["inference", "lora", "full-finetune"]), label="task")
    table = {**_WORKLOAD_OPTS, **(_COST_OPTS if command == "cost" else {})}
    if command in ("memory", "fit"):  # they do not read it, so they do not take it
        table.pop("--utilization")
    chosen = data.draw(st.lists(st.sampled_from(sorted(table)), min_size=1, max_size=3, unique=True))
    argv = [command, "-m", "llama-3-8b", "-t", task, "-g", "h100-sxm"]
    refused = False
    for opt in chosen:
        value, outside = _value(data, opt, table[opt])
        refused |= outside
        argv += [f"{opt}={value}"]
    if data.draw(st.booleans(), label="json"):
        argv.append("--json")
    code, out, err = _run(capsys, argv)
    if refused:
        _refused_cleanly(code, out, err, argv)
    else:
        _clean(code, out, err, argv)


@pytest.mark.parametrize("command", ["memory", "fit", "cost", "plan"])
def test_the_largest_accepted_sizes_run_cleanly(capsys, command):
    """The edge of every size limit at once: figures past 64 bits still print (as JSON floats)."""
    biggest = [f"--batch={1 << 20}", f"--seq={1 << 24}", "--gpus=8"]
    argv = [command, "-m", "llama-3-8b", "-t", "full-finetune", "-g", "h100-sxm", *biggest, "--json"]
    code, out, err = _run(capsys, argv)
    _clean(code, out, err, argv)
