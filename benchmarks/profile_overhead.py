"""What does profiling cost? A reference training loop without gpuwise, with gpuwise, and with
torch.profiler, interleaved round by round in one process so machine load hits all three alike.

Each round runs every mode for the same steps (order rotating); a mode's overhead is the median
over rounds of (its figure / the plain loop's figure in that round) - 1, for two figures:
- CPU time per step of the whole process (time.process_time: the training thread, gpuwise's
  telemetry thread, the profiler's own work). What a profiler adds is CPU work, and CPU time does
  not count the stalls other programs cause on a shared machine, so this is the headline figure;
- wall time per step (steps over twice the median dropped as preemptions), reported beside it:
  on a quiet machine the two agree, on a loaded one wall time mostly measures the neighbours.

Garbage is collected (``gc.collect()``) after every mode's pass, outside the timed steps. Without
it one mode's teardown is paid inside another's timed steps: torch.profiler leaves its event
buffers in reference cycles, and freeing them (~12 ms) happened at the next gen-0 collection,
which the mode that allocates Python objects per step (gpuwise) triggered far more often than
the plain loop (~+1.5 % charged to gpuwise, measured with gc.callbacks). Collections a mode's
own steps trigger still land in its timed steps, as they would in a real run.

On a shared machine even CPU time drifts by a few % from round to round, which is more than
gpuwise costs. So the benchmark also measures gpuwise's cost directly, in absolute terms:
- hooks: the same loop with a tiny model (steps of ~0.5 ms, where microseconds show), plain vs
  gpuwise without telemetry, interleaved; the median difference is the cost per step;
- telemetry: the CPU time the sampler thread itself uses, per second of run.
``gpuwise_cost_pct_of_step`` = (hook µs per step) / (CPU time of a plain step) + telemetry CPU share. The loop is a real one:
DataLoader over in-memory data, a 3-layer MLP, AdamW, on one CPU thread (steady step times).

Last line: {"step_ms": X, "gpuwise_overhead_pct": Y, "torch_profiler_overhead_pct": Z}
Usage: python benchmarks/profile_overhead.py [--rounds 60] [--steps 30] [--hidden 1024] [--hooks-only]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import gpuwise

WARMUP = 6  # steps each mode runs before its timed steps (gpuwise narrows its hooks after its warm-up)


def make_loop(hidden: int, batch: int, steps: int):
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(batch * (steps + WARMUP), hidden), torch.randint(0, 10, (batch * (steps + WARMUP),)))
    model = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run() -> tuple[float, float]:
        """Train one pass; (process CPU seconds per timed step, wall seconds per timed step)."""
        marks, cpu0 = [], 0.0
        for i, (x, y) in enumerate(DataLoader(data, batch_size=batch)):
            if i == WARMUP:
                cpu0 = time.process_time()
            marks.append(time.perf_counter())
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        marks.append(time.perf_counter())
        cpu = (time.process_time() - cpu0) / steps
        timed = marks[WARMUP:]
        steps_s = [b - a for a, b in zip(timed, timed[1:])]
        limit = 2 * statistics.median(steps_s)
        kept = [t for t in steps_s if t <= limit]
        return cpu, sum(kept) / len(kept)

    return run


def modes():
    def plain():
        return contextlib.nullcontext()

    def with_gpuwise():
        return gpuwise.profile(warmup=WARMUP, store=False)

    def gpuwise_hooks_only():
        return gpuwise.profile(warmup=WARMUP, store=False, telemetry=False)

    def with_torch_profiler():
        return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])

    return {"plain": plain, "gpuwise": with_gpuwise, "torch.profiler": with_torch_profiler, "gpuwise hooks only": gpuwise_hooks_only}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--hooks-only", action="store_true", help="also run gpuwise without its telemetry thread")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    loop = make_loop(args.hidden, args.batch, args.steps)
    loop()  # first-touch allocations, lazy init
    contexts = modes()
    if not args.hooks_only:
        contexts.pop("gpuwise hooks only")
    names = list(contexts)
    cpu: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            with contexts[name]():
                c, w = loop()
            gc.collect()  # this mode's garbage is freed here, not in the next mode's timed steps
            cpu[name].append(c)
            wall[name].append(w)
        print(f"round {r + 1:2d} (cpu/wall ms): " + "  ".join(f"{n} {cpu[n][-1] * 1000:.2f}/{wall[n][-1] * 1000:.2f}" for n in names),
              file=sys.stderr)

    def overhead(series: dict[str, list[float]], name: str) -> float:
        return 100.0 * (statistics.median(t / p for t, p in zip(series[name], series["plain"])) - 1.0)

    step_ms = 1000.0 * statistics.median(wall["plain"])
    hook_us, telemetry_pct = direct_costs(args.batch)
    cpu_step_ms = 1000.0 * statistics.median(cpu["plain"])  # the step as it would be on an idle machine
    direct_pct = 100.0 * hook_us / (cpu_step_ms * 1000.0) + telemetry_pct
    print(f"plain loop: {step_ms:.2f} ms/step wall, {1000 * statistics.median(cpu['plain']):.2f} ms CPU "
          f"(medians over {args.rounds} rounds × {args.steps} steps, 1 CPU thread)")
    for name in names[1:]:
        print(f"{name:20s} overhead: {overhead(cpu, name):+6.2f} % CPU time   {overhead(wall, name):+6.2f} % wall time")
    print(f"gpuwise measured directly: hooks {hook_us:.1f} µs per step, telemetry thread {telemetry_pct:.3f} % of a core "
          f"-> {direct_pct:.3f} % of a {cpu_step_ms:.1f} ms step")
    print(json.dumps({"step_ms": round(step_ms, 3), "gpuwise_overhead_pct": round(overhead(cpu, "gpuwise"), 3),
                      "torch_profiler_overhead_pct": round(overhead(cpu, "torch.profiler"), 3),
                      "gpuwise_wall_overhead_pct": round(overhead(wall, "gpuwise"), 3),
                      "torch_profiler_wall_overhead_pct": round(overhead(wall, "torch.profiler"), 3),
                      "gpuwise_hook_us_per_step": round(hook_us, 2), "gpuwise_telemetry_cpu_pct": round(telemetry_pct, 4),
                      "gpuwise_cost_pct_of_step": round(direct_pct, 4)}))


def direct_costs(batch: int, rounds: int = 40, steps: int = 200) -> tuple[float, float]:
    """(µs gpuwise's hooks add per step, % of a core its telemetry thread uses), measured directly."""
    from gpuwise.profile import telemetry

    tiny = make_loop(64, batch, steps)
    tiny()
    diffs = []

    def plain() -> float:
        cpu, _ = tiny()
        gc.collect()  # as in main(): no run pays for the previous run's garbage
        return cpu

    def hooked() -> float:
        with gpuwise.profile(warmup=WARMUP, store=False, telemetry=False):
            cpu, _ = tiny()
        gc.collect()
        return cpu

    for r in range(rounds):
        if r % 2:
            plain_cpu = plain()
            hooked_cpu = hooked()
        else:
            hooked_cpu = hooked()
            plain_cpu = plain()
        diffs.append((hooked_cpu - plain_cpu) * 1e6)
    used = [0.0]
    original = telemetry.TelemetrySampler.sample_once

    def timed(self):
        t0 = time.thread_time()
        try:
            return original(self)
        finally:
            used[0] += time.thread_time() - t0

    telemetry.TelemetrySampler.sample_once = timed
    try:
        sampler = telemetry.TelemetrySampler(interval_s=0.5)
        sampler.start()
        time.sleep(5.0)
        sampler.stop()
    finally:
        telemetry.TelemetrySampler.sample_once = original
    return statistics.median(diffs), 100.0 * used[0] / 5.0


if __name__ == "__main__":
    main()
