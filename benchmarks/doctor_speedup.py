"""`gpuwise doctor`'s speed-up on this machine, over several invocations (each: profile, fix, re-run).

The target is >= 2x on a 2-core CPU machine, at any load (the doctor sizes its workload to the machine
first; each line says how much CPU other processes used). Each repetition is a full doctor run, not saved.
Last line: {"repeats": N, "before_steps_per_s": ..., "after_steps_per_s": ..., "speedup_x_median": ...,
"speedup_x_min": ...}
Usage: python benchmarks/doctor_speedup.py [--repeats 3] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from gpuwise.doctor.run import run_doctor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    before, after, speedups = [], [], []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        result = run_doctor(steps=args.steps, store=False)
        before.append(result.before_steps_per_s)
        after.append(result.after_steps_per_s)
        speedups.append(result.speedup_x or 0.0)
        fixes = ", ".join(f"{f.setting}={f.after}" for f in result.applied_fixes)
        others = ", ".join("—" if v is None else f"{v:.0f} %" for v in result.others_cpu_pct)
        print(
            f"run {i + 1}: {result.before_steps_per_s:.2f} -> {result.after_steps_per_s:.2f} steps/s = "
            f"{speedups[-1]:.2f}x ({fixes}; {time.perf_counter() - t0:.1f} s); data wait "
            f"{result.before.phases['data_wait'].pct:.0f} % -> {result.after.phases['data_wait'].pct:.0f} %; "
            f"findings after: {', '.join(f.id for f in result.after.findings) or 'none'}; "
            f"other processes' CPU before/after: {others}"
        )
    print(
        json.dumps(
            {
                "repeats": args.repeats,
                "before_steps_per_s": round(statistics.median(before), 3),
                "after_steps_per_s": round(statistics.median(after), 3),
                "speedup_x_median": round(statistics.median(speedups), 3),
                "speedup_x_min": round(min(speedups), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
