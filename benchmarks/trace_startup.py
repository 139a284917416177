#!/usr/bin/env python
"""Start-up of `gpuwise trace` on a tiny trace: wall seconds, CPU seconds and peak RSS, median of N runs.

Usage: python benchmarks/trace_startup.py [--runs N] [--trace FILE]

A trace of a few events (default: tests/data/traces/hand_rank0.json, 4 KB, written for this project)
costs next to nothing to read, so a run is the price of starting: the interpreter, the imports, parsing
the options and printing the report. Each output (`--json`, the terminal report piped to a file,
`--markdown`) runs N times as ``python -m gpuwise trace FILE ...`` in a fresh process, after one untimed
run that fills a bytecode cache (``PYTHONPYCACHEPREFIX`` in a temporary directory, as an installed
package has its ``.pyc`` files, whatever ``PYTHONDONTWRITEBYTECODE`` says). Every timed run has a fresh
per-rank summary cache (a first look at the trace: the cache write is included).

Figures per output: median and minimum wall seconds (target of issue #26: under 0.2 s), median CPU
seconds of the process (user + system, wait4: comparable on a loaded machine, where wall time measures
the neighbours), median peak RSS (VmHWM of the exec'd process, MB) and the number of modules loaded.
Floors beside them: a bare interpreter, and ``import numpy`` with one OpenBLAS thread (what `trace` must
load). The 1-minute load average is printed before and after. LAST line: one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "data" / "traces" / "hand_rank0.json"
TARGET_S = 0.2  # issue #26, deliverable 6

# `python -m gpuwise ...` as it is, plus one line on stderr at exit: the process's own peak RSS (VmHWM:
# ru_maxrss of a child keeps the forked parent's high-water mark across exec) and how many modules it
# loaded, whether Rich among them.
_FIGURES_AT_EXIT = (
    "import atexit, sys\n"
    "def _figures():\n"
    "    hwm = next((l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')), '0')\n"
    "    print(f'GPUWISE_BENCH={hwm},{len(sys.modules)},{int(\"rich\" in sys.modules)}', file=sys.stderr)\n"
    "atexit.register(_figures)\n"
)
_CLI = _FIGURES_AT_EXIT + (
    "import runpy\n"
    "sys.argv[0] = 'gpuwise'\n"
    "runpy.run_module('gpuwise', run_name='__main__', alter_sys=True)\n"
)

# name -> arguments after the trace file
OUTPUTS: dict[str, list[str]] = {
    "trace --json": ["--json"],
    "trace (terminal, piped)": [],
    "trace --markdown": ["--markdown"],
}
FLOORS: dict[str, str] = {
    "python (bare interpreter)": "pass\n",
    "import numpy (1 BLAS thread)": "import numpy\n",
}


def _env(pycache: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONPYCACHEPREFIX": pycache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("OPENBLAS_NUM_THREADS", None)  # what gpuwise chooses, not what this shell says
    env.pop("COLUMNS", None)
    return env


def _timed(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """One fresh process: wall s, CPU s (user + sys), peak RSS MB and modules loaded (when it reports)."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        err.seek(0)
        text = err.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[-4:])} failed: {text.strip()[-400:]}")
    figures = {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}
    line = next((x for x in text.splitlines() if x.startswith("GPUWISE_BENCH=")), None)
    if line is not None:
        hwm_kb, modules, rich = line.removeprefix("GPUWISE_BENCH=").split(",")
        figures.update(rss_mb=int(hwm_kb) / 1024, modules=int(modules), rich=int(rich))
    return figures


def _medians(argv: list[str], env: dict[str, str], runs: int, fresh_cache: bool) -> dict[str, float]:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)  # .pyc
    rows = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache_dir:
            run_env = {**env, "GPUWISE_TRACE_CACHE": str(Path(cache_dir) / "summaries.sqlite")}
            rows.append(_timed(argv, run_env if fresh_cache else env))
    out = {
        f"median_{k}": round(statistics.median(r[k] for r in rows), 3) for k in ("wall_s", "cpu_s", "rss_mb")
    }
    out["min_wall_s"] = round(min(r["wall_s"] for r in rows), 3)
    if "modules" in rows[0]:
        out["modules"] = rows[0]["modules"]
        out["rich_loaded"] = bool(rows[0]["rich"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="`gpuwise trace` start-up on a tiny trace")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--trace", type=Path, default=TINY, help="a small trace (default: %(default)s)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="gpuwise-pycache-") as pycache:
        env = _env(pycache)
        print(f"{args.runs} runs each; trace {args.trace} ({args.trace.stat().st_size} bytes)")
        print(f"{'':30} {'wall s':>7} {'min s':>6} {'cpu s':>6} {'rss MB':>7} {'modules':>8}  rich")
        for name, extra in OUTPUTS.items():
            cmd = [sys.executable, "-c", _CLI, "trace", str(args.trace), *extra]
            figures[name] = row = _medians(cmd, env, args.runs, fresh_cache=True)
            met = "met" if row["median_wall_s"] < TARGET_S else "missed"
            print(
                f"{name:30} {row['median_wall_s']:7.3f} {row['min_wall_s']:6.3f} {row['median_cpu_s']:6.3f} "
                f"{row['median_rss_mb']:7.1f} {row['modules']:8d}  {'yes' if row['rich_loaded'] else 'no':4}"
                f"  (< {TARGET_S} s: {met})"
            )
        floor_env = {**env, "OPENBLAS_NUM_THREADS": "1"}
        for name, code in FLOORS.items():
            cmd = [sys.executable, "-c", _FIGURES_AT_EXIT + code]
            figures[name] = row = _medians(cmd, floor_env, args.runs, fresh_cache=False)
            print(
                f"{name:30} {row['median_wall_s']:7.3f} {row['min_wall_s']:6.3f} {row['median_cpu_s']:6.3f} "
                f"{row['median_rss_mb']:7.1f}"
            )
    load_after = os.getloadavg()[0]
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after; {os.cpu_count()} CPUs")
    summary = {
        "runs": args.runs,
        "trace_bytes": args.trace.stat().st_size,
        "load_avg_1min": [round(load_before, 2), round(load_after, 2)],
        "target_wall_s": TARGET_S,
        "figures": figures,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
