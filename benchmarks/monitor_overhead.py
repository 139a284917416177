#!/usr/bin/env python
"""CPU cost of `gpuwise monitor --record` per sample of 8 GPUs, SQLite write and downsampling included.

Usage: python benchmarks/monitor_overhead.py [--ticks N]

**Faked NVML** (no GPU on the development machine): tests/fake_nvml.py patches pynvml's functions with
unittest.mock, so each NVML query here costs a Python mock call (~several µs) instead of a driver call;
the figure is gpuwise's own CPU plus the fake's. Every tick runs the real sampler (8 GPUs, every field,
processes), the real recorder (one transaction) and the downsampler's step, back to back without
sleeping; the CPU time per tick (process user + system) at 1 Hz is the share of one core. Target: at
most 1 % of one core. The parts are timed apart too: sampling alone, and recording alone.
The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import pynvml  # noqa: E402

from fake_nvml import FakeNvml, scenario  # noqa: E402
from gpuwise.monitor.recorder import Recorder, ResilientSampler  # noqa: E402
from gpuwise.store.history import HistoryStore  # noqa: E402

TARGET_PCT = 1.0
GPUS = 8


def cpu_s() -> float:
    return time.process_time()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=600)
    args = parser.parse_args()
    base = scenario("healthy_and_idle")
    gpus = [{**base[i % 2], "uuid": f"GPU-bench-{i}"} for i in range(GPUS)]
    fake = FakeNvml(gpus)
    with mock.patch.multiple(pynvml, **fake.patches()), tempfile.TemporaryDirectory() as tmp:
        sampler = ResilientSampler()
        store = HistoryStore.open(Path(tmp) / "monitor.sqlite")
        recorder = Recorder(store, 1.0)
        snaps = [sampler.sample() for _ in range(10)]  # warm-up: first queries, statement cache
        for i, snap in enumerate(snaps):
            snap.time_unix_s = time.time() - 100 + i
            recorder.record(snap)
        start = cpu_s()
        for _ in range(args.ticks):
            recorder.record(sampler.sample())
        total = (cpu_s() - start) / args.ticks
        start = cpu_s()
        taken = [sampler.sample() for _ in range(args.ticks)]
        sampling = (cpu_s() - start) / args.ticks
        t = time.time()
        for i, snap in enumerate(taken):
            snap.time_unix_s = t + 1 + i  # seconds apart, as at 1 Hz (minute buckets roll up)
        start = cpu_s()
        for snap in taken:
            recorder.record(snap)
        recording = (cpu_s() - start) / args.ticks
        size = store.size_bytes()
        sampler.close()
        store.close()
    figures = {
        "nvml": "faked (tests/fake_nvml.py, unittest.mock)",
        "gpus": GPUS,
        "ticks": args.ticks,
        "cpu_ms_per_tick": round(total * 1000, 3),
        "cpu_ms_sampling": round(sampling * 1000, 3),
        "cpu_ms_recording": round(recording * 1000, 3),
        "core_pct_at_1hz": round(total * 100, 3),
        "target_core_pct": TARGET_PCT,
        "meets_target": total * 100 <= TARGET_PCT,
        "store_bytes_after": size,
    }
    print(
        f"8 GPUs at 1 Hz (faked NVML): {total * 1000:.2f} ms CPU per tick = {total * 100:.2f} % of one core"
    )
    print(f"  sampling {sampling * 1000:.2f} ms, recording (SQLite + downsampling) {recording * 1000:.2f} ms")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
