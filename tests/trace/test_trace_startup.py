"""What `gpuwise trace` loads for a run: `--json` draws no report and needs no renderer (start-up)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuwise.trace.table import percentile

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
RANK0 = DATA / "hand_rank0.json"

# Modules a one-file `--json` run has no use for: the terminal renderer and the report builders, the
# process pool (one file runs in the process), numpy.ma (np.percentile's first call), the workload spec
# (an annotation of the evidence), importlib.resources (package data is read beside the package:
# catalog/bundled.py), html (Markdown escaping), OpenSSL's hashlib (the summary cache's hash: these runs
# have none; with one, it loads after the parse, past the peak of RSS).
NOT_LOADED = (
    "rich",
    "_hashlib",
    "importlib.resources",
    "html",
    "gpuwise.report.trace_view",
    "gpuwise.report.document",
    "concurrent.futures",
    "multiprocessing",
    "numpy.ma",
    "gpuwise.workload.spec",
)

_RUN = """
import sys
from gpuwise.cli.app import main
try:
    main({argv!r})
except SystemExit:
    pass
print("LOADED=" + ",".join(m for m in {names!r} if m in sys.modules), file=sys.stderr)
"""


def _run(argv: list[str]) -> tuple[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _RUN.format(argv=argv, names=NOT_LOADED)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPUWISE_TRACE_CACHE": "off"},
    )
    loaded = next(line for line in proc.stderr.splitlines() if line.startswith("LOADED="))
    return proc.stdout, [m for m in loaded.removeprefix("LOADED=").split(",") if m]


def test_json_run_loads_no_renderer_or_pool():
    out, loaded = _run(["trace", str(RANK0), "--json"])
    assert json.loads(out)["kind"] == "trace"
    assert loaded == []


def test_terminal_report_still_draws_with_rich():
    out, loaded = _run(["trace", str(RANK0)])
    assert "rich" in loaded and "gpuwise.report.trace_view" in loaded
    assert "Temporal breakdown" in out and "Top 4 kernels by device time" in out


@pytest.mark.parametrize("seed", range(4))
def test_percentile_is_numpys_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for trial in range(2000):
        n = int(rng.integers(1, 40)) if trial % 10 else int(rng.integers(40, 3000))
        values = [
            rng.random(n) * 10.0 ** int(rng.integers(-3, 6)),
            rng.integers(0, 5, n) / 7.0,  # many ties
            np.round(rng.exponential(100.0, n), 3),
        ][trial % 3]
        for q in (0, 1, 10, 33.3, 50, 75, 90, 99, 100):
            assert percentile(values, q) == float(np.percentile(values, q)), (n, q)


def test_percentile_of_nan_and_one_value():
    assert np.isnan(percentile(np.array([1.0, np.nan, 3.0]), 50))
    assert percentile(np.array([7.5]), 90) == 7.5


# What OPENBLAS_NUM_THREADS says at the moment NumPy is imported (an audit hook sees the import), when
# the command's body starts (it imports the trace pipeline: every child process it could start comes
# later) and after the run: `trace` loads NumPy with one BLAS thread unless the user chose a number, and
# removes the variable right after that import.
_BLAS_RUN = """
import os, sys
seen, in_body = [], []
def hook(event, args):
    if event == "import" and args[0] == "numpy" and not seen:
        seen.append(os.environ.get("OPENBLAS_NUM_THREADS"))
    if event == "import" and args[0] == "gpuwise.trace.parallel" and not in_body:
        in_body.append(os.environ.get("OPENBLAS_NUM_THREADS"))
sys.addaudithook(hook)
from gpuwise.cli.app import main
try:
    main({argv!r})
except SystemExit:
    pass
print("BLAS=" + repr((seen, os.environ.get("OPENBLAS_NUM_THREADS"), in_body)), file=sys.stderr)
"""


def _blas_threads(argv: list[str], user_value: str | None) -> tuple[list[str | None], str | None]:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if user_value is not None:
        env["OPENBLAS_NUM_THREADS"] = user_value
    proc = subprocess.run(
        [sys.executable, "-c", _BLAS_RUN.format(argv=argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "GPUWISE_TRACE_CACHE": "off"},
    )
    line = next(line for line in proc.stderr.splitlines() if line.startswith("BLAS="))
    seen, after, in_body = ast.literal_eval(line.removeprefix("BLAS="))
    return seen, after, in_body


def test_trace_loads_numpy_with_one_blas_thread_and_removes_the_variable_at_once():
    # "1" while NumPy loads, gone before the command's body runs (no child could inherit it), gone after
    assert _blas_threads(["trace", str(RANK0), "--json"], None) == (["1"], None, [None])


def test_trace_keeps_the_users_blas_threads():
    assert _blas_threads(["trace", str(RANK0), "--json"], "3") == (["3"], "3", ["3"])


@pytest.mark.parametrize("argv", [["trace", "--help"], ["trace", "--top", "0", "x.json"]])
def test_trace_help_and_usage_errors_do_not_load_numpy(argv):
    assert _blas_threads(argv, None) == ([], None, [])


def test_other_commands_keep_numpys_default_blas_threads():
    seen, after, _ = _blas_threads(["memory", "--model", "gpt2", "--json"], None)
    assert seen in ([], [None]) and after is None


# A trace pool worker (`trace DIR --workers N`) loads NumPy in its initializer, before any task: with one
# BLAS thread, the worker's environment unchanged afterwards. The initializer's module must not load NumPy
# itself (the worker imports it to find the initializer).
_WORKER_INIT = """
import os, sys
seen = []
def hook(event, args):
    if event == "import" and args[0] == "numpy" and not seen:
        seen.append(os.environ.get("OPENBLAS_NUM_THREADS"))
sys.addaudithook(hook)
from gpuwise.trace.blas_threads import worker_init
assert "numpy" not in sys.modules
worker_init()
print("BLAS=" + repr((seen, "numpy" in sys.modules, os.environ.get("OPENBLAS_NUM_THREADS"))))
"""


@pytest.mark.parametrize(("user_value", "expected"), [(None, (["1"], True, None)), ("2", (["2"], True, "2"))])
def test_pool_worker_loads_numpy_with_one_blas_thread(user_value, expected):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if user_value is not None:
        env["OPENBLAS_NUM_THREADS"] = user_value
    proc = subprocess.run(
        [sys.executable, "-c", _WORKER_INIT], capture_output=True, text=True, timeout=120, env=env, check=True
    )
    assert ast.literal_eval(proc.stdout.strip().removeprefix("BLAS=")) == expected
