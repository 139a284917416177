"""Wall time of `gpuwise cost` (target ≤ 0.5 s per call, no torch import).

    python benchmarks/cost_speed.py [--repeat 5]

Runs the real entry point in fresh processes on every example workload (examples/*.yaml, or
a few model ids if there are none), with and without --all-gpus, and checks in a separate
process that torch never gets imported. Last line: one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.5


def _cases() -> list[list[str]]:
    examples = [
        p for p in sorted((REPO / "examples").glob("*.yaml")) if p.name not in {"gpus.yaml", "models.yaml"}
    ]
    if examples:
        return [["cost", str(p), "--usd-per-hour", "2", "--json"] for p in examples]
    return [
        ["cost", "llama-3-8b", "-t", "lora", "--json"],
        ["cost", "llama-3-70b", "-t", "serving", "-n", "4", "--tp", "4", "--json"],
    ]


# Every example runs on the bundled catalog alone (no user GPU file).
ENV = {k: v for k, v in os.environ.items() if k != "GPUWISE_GPUS"}


def _time(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwise", *args], capture_output=True, text=True, cwd=REPO, env=ENV
    )
    return time.perf_counter() - start, proc.returncode


def _torch_imported(args: list[str]) -> bool:
    code = (
        f"import sys\nfrom gpuwise.cli.app import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(f\"TORCH={'torch' in sys.modules}\")"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=ENV)
    return "TORCH=True" in proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results = []
    for case in _cases():
        for variant in (case, [*case, "--all-gpus"]):
            times, codes = zip(*(_time(variant) for _ in range(args.repeat)), strict=True)
            label = " ".join(a if not a.endswith(".yaml") else Path(a).name for a in variant[1:])
            results.append((label, statistics.median(times), max(times), set(codes)))
            median, worst = statistics.median(times), max(times)
            print(f"{median:6.3f} s median  {worst:6.3f} s max  exit {sorted(set(codes))}  {label}")
    torch = any(_torch_imported(case) for case in _cases())
    medians = [r[1] for r in results]
    summary = {
        "cases": len(results),
        "median_s": round(statistics.median(medians), 3),
        "worst_median_s": round(max(medians), 3),
        "target_s": TARGET_S,
        "within_target": max(medians) <= TARGET_S,
        "torch_imported": torch,
        "failed_cases": sum(1 for r in results if r[3] != {0}),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
