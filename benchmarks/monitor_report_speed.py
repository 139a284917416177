#!/usr/bin/env python
"""`gpuwise monitor report` over 30 days × 8 GPUs of recorded history: wall time and store size.

Usage: python benchmarks/monitor_report_speed.py [--days 30] [--gpus 8] [--keep DIR]

The history is synthetic but written through the real recorder API (`Recorder.record`, one transaction
per tick, the downsampler's bounded step after each): the older days at one sample per minute (each raw
row rolls up into one 1-min bucket and hourly buckets, then is pruned as the default retention says),
the last 6 hours at 1 Hz, as a recorder running with the defaults (raw 6 h, 1-min 30 days, 1-h forever)
leaves them. The GPUs follow a day/night pattern (busy by day, some idle at night, one throttled hour a
day), with one or two processes of three users each. Then `gpuwise monitor report --since 30d --json`
runs in a fresh process (imports included), three times (read at 1-h resolution: windows over 8 days
are), and `--since 7d` the same way (read at 1-min resolution); targets: the 30-day report at most 3 s,
store at most 50 MB.
The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpuwise.monitor.reading import GpuProcess, GpuReading
from gpuwise.monitor.recorder import Recorder
from gpuwise.monitor.sampler import Snapshot
from gpuwise.monitor.tiers import Retention
from gpuwise.store.history import HistoryStore
from gpuwise.units import GiB

TARGET_S = 3.0
TARGET_MB = 50.0
RAW_HOURS = 6
USERS = ("alice", "bob", "carol")


def reading(i: int, t: float, counters: list[float], dt: float) -> GpuReading:
    hour = (t % 86400) / 3600
    day = 8 <= hour < 20
    idle = not day and i % 2 == 1
    busy = 0.0 if idle else (90.0 if day else 55.0) - 3 * (i % 4)
    power = 60.0 if idle else 150 + 2.5 * busy
    r = GpuReading(i, "NVIDIA A100-SXM4-80GB", f"GPU-synthetic-{i}")
    r.busy_pct = busy
    r.memory_total_bytes = 80 * GiB
    r.memory_used_bytes = int((0.5 if idle else 30 + 5 * (i % 4)) * GiB)
    r.power_w = power
    counters[i] += power * dt  # the counter: the integral of the power
    r.energy_j = counters[i]
    r.temperature_c = 45.0 if idle else 70.0
    r.throttle_reasons = ["gpu_idle"] if idle else (["sw_power_cap"] if int(hour) == 14 else [])
    r.processes = (
        []
        if idle
        else [
            GpuProcess(1000 + i, USERS[i % 3], "python", int(20 * GiB), busy * 0.7),
            GpuProcess(2000 + i, USERS[(i + 1) % 3], "jupyter", int(4 * GiB), busy * 0.3),
        ][: 1 + i % 2]
    )
    return r


def build(path: Path, days: float, gpus: int) -> float:
    store = HistoryStore.open(path)
    now = time.time()
    start = now - days * 86400
    raw_from = now - RAW_HOURS * 3600
    t0 = time.perf_counter()
    counters = [1e6 * (i + 1) for i in range(gpus)]
    minute = Recorder(store, 60.0, Retention())
    t = start
    while t < raw_from:
        minute.record(Snapshot(t, "bench-host", gpus=[reading(i, t, counters, 60.0) for i in range(gpus)]))
        t += 60.0
    second = Recorder(store, 1.0, Retention())
    second.downsampler = minute.downsampler
    while t < now:
        second.record(Snapshot(t, "bench-host", gpus=[reading(i, t, counters, 1.0) for i in range(gpus)]))
        t += 1.0
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return time.perf_counter() - t0


def timed(cmd: list[str]) -> tuple[float, float, dict]:
    """Median wall and CPU seconds of three fresh-process runs, and the JSON of the last."""
    walls, cpus = [], []
    for _ in range(3):
        before = os.times()
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t0)
        after = os.times()
        cpus.append(
            after.children_user + after.children_system - before.children_user - before.children_system
        )
        if done.returncode:
            raise SystemExit(done.stderr)
    return statistics.median(walls), statistics.median(cpus), json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--keep", type=Path, help="write the store here and keep it")
    parser.add_argument("--reuse", action="store_true", help="report on the store --keep already holds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = (args.keep or Path(tmp)) / "monitor.sqlite"
        built_s = None
        if not (args.reuse and path.exists()):
            path.unlink(missing_ok=True)
            built_s = build(path, args.days, args.gpus)
        size_mb = sum(p.stat().st_size for p in path.parent.glob("monitor.sqlite*")) / 1e6
        cmd = [sys.executable, "-m", "gpuwise", "monitor", "report", "--store", str(path), "--json"]
        month_s, month_cpu, month = timed([*cmd, "--since", f"{math.ceil(args.days)}d"])
        week_s, week_cpu, week = timed([*cmd, "--since", "7d"])
    figures = {
        "days": args.days,
        "gpus": args.gpus,
        "build_s": None if built_s is None else round(built_s, 1),
        "store_mb": round(size_mb, 1),
        "report_wall_s": round(month_s, 2),
        "report_cpu_s": round(month_cpu, 2),
        "report_gpu_hours": round(month["totals"]["observed_hours"], 1),
        "report_energy_kwh": round(month["totals"]["energy_kwh"], 1),
        "report_resolution": month["notes"],
        "week_report_wall_s": round(week_s, 2),
        "week_report_cpu_s": round(week_cpu, 2),
        "week_resolution": week["notes"],
        "load_average_1min": round(os.getloadavg()[0], 2),
        "target_s": TARGET_S,
        "target_mb": TARGET_MB,
        "meets_targets": month_s <= TARGET_S and size_mb <= TARGET_MB,
    }
    print(
        f"{args.days:g} days × {args.gpus} GPUs: store {size_mb:.1f} MB; report --since "
        f"{math.ceil(args.days)}d {month_s:.2f} s wall, --since 7d {week_s:.2f} s (medians of 3, fresh "
        "processes)"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
