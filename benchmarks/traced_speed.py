#!/usr/bin/env python
"""Wall time and peak RSS of the traced simulation of a Llama-3-8B training step (batch 1, seq 2048).

Usage: python benchmarks/traced_speed.py [--model llama-3-8b] [--task full-finetune] [--runs 1]

Each run is a fresh interpreter (`python -m gpuwise memory --traced --json`), so imports of torch,
transformers and peft are paid as a user pays them. Peak RSS is the child's ru_maxrss. Targets
(issue 5): at most 30 s wall and 1 GB RSS. The machine is shared: timings are noisy, the minimum is
the least disturbed run. The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_WALL_S = 30.0
TARGET_RSS_BYTES = 1_000_000_000  # 1 GB (decimal)


def run_once(args: list[str]) -> tuple[float, int, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwise", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"gpuwise {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    # ru_maxrss of children is the largest child so far (KiB on Linux); runs are sequential and alike.
    rss = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) * 1024
    return wall, rss, json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3-8b")
    parser.add_argument("--task", default="full-finetune")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--runs", type=int, default=1)
    opts = parser.parse_args()
    args = [
        "memory",
        "--model",
        opts.model,
        "--task",
        opts.task,
        "--precision",
        opts.precision,
        "--batch",
        "1",
        "--seq",
        "2048",
        "--traced",
        "--json",
    ]
    walls, rss, doc = [], 0, {}
    for _ in range(opts.runs):
        wall, rss_run, doc = run_once(args)
        walls.append(wall)
        rss = max(rss, rss_run)
    load = os.getloadavg()[0]
    wall = min(walls)
    print(
        f"{opts.model} {opts.task} {opts.precision}, batch 1 x 2048: peak allocated "
        f"{doc['peak_allocated_bytes'] / 2**30:.2f} GiB ({doc['peak_phase']}), "
        f"{doc['flops_per_step'] / 1e12:.1f} TFLOP/step"
    )
    print(
        f"wall {wall:.1f} s (target <= {TARGET_WALL_S:.0f} s; "
        f"simulation itself {doc['simulation_wall_s']:.1f} s), "
        f"peak RSS {rss / 1e9:.2f} GB (target <= {TARGET_RSS_BYTES / 1e9:.0f} GB), "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        json.dumps(
            {
                "benchmark": "traced_speed",
                "model": opts.model,
                "task": opts.task,
                "precision": opts.precision,
                "batch_size": 1,
                "seq_len": 2048,
                "runs": opts.runs,
                "wall_s": round(wall, 2),
                "wall_s_all": [round(x, 2) for x in walls],
                "simulation_wall_s": doc["simulation_wall_s"],
                "peak_rss_bytes": rss,
                "load_average_1m": round(load, 2),
                "peak_allocated_bytes": doc["peak_allocated_bytes"],
                "peak_phase": doc["peak_phase"],
                "flops_per_step": doc["flops_per_step"],
                "wall_ok": wall <= TARGET_WALL_S,
                "rss_ok": rss <= TARGET_RSS_BYTES,
            }
        )
    )


if __name__ == "__main__":
    main()
