#!/usr/bin/env python
"""Wall time of planning commands in fresh processes, and proof that they never import torch.

Usage: python benchmarks/cli_speed.py [--runs N]

Each command runs N times as ``python -m gpuwise ...`` (a fresh interpreter each time, so imports
are paid every run, as a user pays them). The target is a median of at most 0.5 s wall per command.
Whether torch was imported is read from ``python -X importtime`` (every imported module is listed).
Timings are noisy on a shared machine: the minimum is the least disturbed run, and the CPU time
(user + system of the child) shows the work done whatever the load; wall time is what the target judges.
The last line is one JSON object with the figures.

Bytecode: an installed package has its ``.pyc`` files (pip compiles them at install time), so the
commands run with a bytecode cache in a temporary directory (``PYTHONPYCACHEPREFIX``), filled by one
untimed run, even where the environment sets ``PYTHONDONTWRITEBYTECODE`` (this development machine
does: every run would then recompile ~12,600 lines of gpuwise, ~0.1 s that no user pays).
``--no-bytecode`` measures that case instead.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.5
FORBIDDEN = ("torch", "transformers", "peft")

# name -> arguments after `python -m gpuwise` (other commands are added here by their owners)
COMMANDS: dict[str, list[str]] = {
    "memory": ["memory", "examples/llama-3-8b-lora.yaml"],
    "plan (full fine-tune)": ["plan", "examples/full-finetune-7b.yaml"],
    "memory --max-batch": ["memory", "examples/llama-3-8b-lora.yaml", "--max-batch"],
    "fit": ["fit", "examples/llama-3-8b-lora.yaml"],
    "plan": ["plan", "examples/llama-3-8b-lora.yaml"],
    "plan (serving)": ["plan", "examples/inference-7b.yaml"],
    "plan (8 GPUs)": ["plan", "examples/pretrain-8xh100.yaml"],
}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_env(pycache: str | None) -> dict[str, str]:
    """The environment of the timed commands: with a bytecode cache in ``pycache``, or none."""
    env = dict(os.environ)
    if pycache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def wall_and_cpu_times(args: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    subprocess.run([sys.executable, "-m", "gpuwise", *args], cwd=REPO, capture_output=True, env=env)
    for _ in range(runs):
        cpu_before, start = _children_cpu_s(), time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "gpuwise", *args], cwd=REPO, capture_output=True, text=True, env=env
        )
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu_s() - cpu_before)
        if proc.returncode != 0:
            raise SystemExit(
                f"gpuwise {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}"
            )
    return walls, cpus


def imported_modules(args: list[str]) -> set[str]:
    """Top-level packages imported while running the command (from -X importtime)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpuwise", *args], cwd=REPO, capture_output=True, text=True
    )
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CLI wall time and torch-free imports")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-bytecode", action="store_true", help="recompile every run (no .pyc cache)")
    args = parser.parse_args(argv)
    pycache = None if args.no_bytecode else tempfile.mkdtemp(prefix="gpuwise-pycache-")
    env = child_env(pycache)
    figures: dict[str, dict] = {}
    failed = False
    print(f"{'command':<22} {'min s':>7} {'median s':>9} {'cpu s':>6}  torch-free  target {TARGET_S} s")
    for name, cmd in COMMANDS.items():
        times, cpus = wall_and_cpu_times(cmd, args.runs, env)
        modules = imported_modules(cmd)
        heavy = sorted(m for m in FORBIDDEN if m in modules)
        median = statistics.median(times)
        figures[name] = {
            "min_s": round(min(times), 3),
            "median_s": round(median, 3),
            "median_cpu_s": round(statistics.median(cpus), 3),
            "imports": heavy,
        }
        ok = "yes" if not heavy else f"NO ({', '.join(heavy)})"
        met = "met" if median <= TARGET_S else "missed"
        print(f"{name:<22} {min(times):7.3f} {median:9.3f} {statistics.median(cpus):6.3f}  {ok:<10}  {met}")
        failed |= bool(heavy)
    summary = {
        "runs": args.runs,
        "load_avg_1min": round(os.getloadavg()[0], 2),  # a busy machine explains a missed target
        "cpu_count": os.cpu_count(),
        "bytecode_cache": pycache is not None,
        "target_s": TARGET_S,
        "torch_imported": any(f["imports"] for f in figures.values()),
        "all_within_target": all(f["median_s"] <= TARGET_S for f in figures.values()),
        "commands": figures,
    }
    print(json.dumps(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
