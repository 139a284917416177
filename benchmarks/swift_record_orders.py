#!/usr/bin/env python
"""ms-swift's variable-length rows against the allocator replay's own order-to-order spread.

Usage: python benchmarks/swift_record_orders.py [--orders N]   (~2 CPU-minutes at 256 orders)

The estimate of a variable-length run (gpuwise.memory.allocator) is the mean over random sample orders of
the reserve the caching allocator keeps from each record length. A published run is one order. ms-swift's
benchmark script gives every configuration the same seed (scripts/benchmark/test_memory_time/run_single.py
@61badfe: ``seed=get_seed(np.random.RandomState(42))`` in a fresh process per configuration; the 1,000
rows sampled above max_length 2048 come from the default ``dataset_seed`` 42), and Qwen-1.8B/7B/14B share
one tokenizer, so at a given max_length the three Qwen runs kept the same samples and, the Trainer seeding
its RandomSampler from that seed, drew them in the same order.

For each max_length this prints, per Qwen size: the measured reserve over the estimate's one step at
max_length (the part the replay must explain), the replay's mean extra, where the measurement falls among
the orders' figures (rank), and the one order that fits the three sizes best. No figure feeds the model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import gpuwise.memory.estimate as estimate_module  # noqa: E402
import validate_memory as vm  # noqa: E402
from gpuwise.catalog import get_model  # noqa: E402
from gpuwise.memory import allocator  # noqa: E402
from gpuwise.units import GiB  # noqa: E402
from gpuwise.workload import workload_from_mapping  # noqa: E402

SIZES = ("1.8b", "7b", "14b")
LENGTHS = (512, 1024, 2048, 4096, 8192)


def _base_and_step(workload) -> tuple[float, float]:
    """The estimate's reserve of one step at max_length and its per-step part (bytes), as it hands them
    to the replay."""
    seen: dict[str, tuple[float, float]] = {}
    original = allocator.variable_length_reserved

    def spy(arch, w, reserved, step, limit):
        seen["args"] = (reserved, step)
        return original(arch, w, reserved, step, limit)

    estimate_module.variable_length_reserved = spy  # type: ignore[assignment]
    try:
        estimate_module.estimate_memory(workload)
    finally:
        estimate_module.variable_length_reserved = original  # type: ignore[assignment]
    return seen["args"]


def _row_orders(row: dict[str, str], orders: int) -> tuple[float, list[float]]:
    """The row's measured GiB and the estimate under each of ``orders`` sample orders (GiB)."""
    mapping, _ = vm.row_to_mapping(row)
    w = workload_from_mapping(mapping)
    base, step = _base_and_step(w)
    shape = allocator.step_shape(get_model(w.model), w)
    memo: dict = {}
    figures = []
    for seed in range(orders):
        lengths = tuple(
            allocator.record_lengths(
                w.sample_tokens_mean or 0.0,
                w.sample_tokens_std,
                w.seq_len,
                w.run_samples or 0.0,
                1,
                w.over_length,
                seed,
            )
        )
        run = allocator._run_reserve(shape, lengths, 1, memo)
        single = allocator._run_reserve(shape, lengths[-1:], 1, memo)
        factor = max(1.0, run / single)
        figures.append((base + (factor - 1.0) * step) / GiB)
    return float(row["measured_value"]), [f - base / GiB for f in figures] + [base / GiB]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=256, help="sample orders per row (%(default)s)")
    args = parser.parse_args(argv)
    vm.use_models(vm.DEFAULT_MODELS)
    rows = {r["id"]: r for r in vm.read_rows([vm.HELDOUT_DATA])}
    print("max_len size  measured-over-one-step  replay mean extra  rank among orders  best shared order")
    for length in LENGTHS:
        per: dict[str, tuple[float, float, list[float]]] = {}
        for size in SIZES:
            measured, figures = _row_orders(rows[f"mem-SW-qwen{size}-{length}"], args.orders)
            base = figures.pop()
            per[size] = (measured, base, figures)
        best = min(
            range(args.orders),
            key=lambda s: max(abs(b + e[s] - m) / m for m, b, e in per.values()),
        )
        for size, (measured, base, extras) in per.items():
            over = measured - base
            rank = sum(e < over for e in extras)
            err = 100 * (base + extras[best] - measured) / measured
            mean = sum(extras) / len(extras)
            print(
                f"{length:7d} {size:>5s}  {over:8.2f} GiB  {mean:8.2f} GiB  {rank:4d}/{args.orders}"
                f"  order {best}: {err:+.1f} %"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
