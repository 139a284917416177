#!/usr/bin/env python
"""CPU cost of `gpuwise monitor --record` per sample of 8 GPUs, SQLite write and downsampling included; and
the live view's CPU at 1 Hz beside nvitop's (issue 30), both on the same faked NVML.

Usage: python benchmarks/monitor_overhead.py [--ticks N] [--tui-seconds S] [--rounds R] [--columns C]

**Faked NVML** (no GPU on the development machine): tests/fake_nvml.py patches pynvml's functions with
unittest.mock, so each NVML query here costs a Python mock call (~several µs) instead of a driver call;
the figure is gpuwise's own CPU plus the fake's. Every tick runs the real sampler (8 GPUs, every field,
processes), the real recorder (one transaction) and the downsampler's step, back to back without
sleeping; the CPU time per tick (process user + system) at 1 Hz is the share of one core. Target: at
most 1 % of one core. The parts are timed apart too: sampling alone, and recording alone.

**Live view vs nvitop** (``--tui-seconds``, 0 skips it): `gpuwise monitor --interval 1` and
`nvitop --interval 1` (1.7.2, from the venv) each run in a child process on a real pseudo-terminal
(C columns x 50 lines, TERM=xterm-256color), the same 8 faked GPUs patched into pynvml in the child before
either tool starts (this script re-runs itself as ``--child gpuwise|nvitop``: the same effect as a
sitecustomize that patches pynvml in each process; nvitop's own NVML wrappers in nvitop.api.libnvml are
pointed at the same fakes). After 5 s of warm-up, the child's CPU time (user + system, psutil) over S
seconds of wall time is its share of one core; the tools run one after the other, R rounds, and the
median of each is compared. Both pay the same mock-call cost per NVML query.
The last line is one JSON object with the figures.
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
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import pynvml  # noqa: E402

from fake_nvml import FakeNvml, scenario  # noqa: E402
from gpuwise.monitor.recorder import Recorder, ResilientSampler  # noqa: E402
from gpuwise.store.history import HistoryStore  # noqa: E402

TARGET_PCT = 1.0
GPUS = 8
WARM_UP_S = 5.0


def bench_gpus() -> list[dict]:
    base = scenario("healthy_and_idle")
    return [{**base[i % 2], "uuid": f"GPU-bench-{i}"} for i in range(GPUS)]


def child(tool: str) -> None:
    """Run ``tool``'s live view at 1 Hz on the faked GPUs (this process is the pseudo-terminal's child)."""
    patches = FakeNvml(bench_gpus()).patches()
    patches["nvmlInitWithFlags"] = mock.Mock(return_value=None)  # nvitop starts NVML with flags
    mock.patch.multiple(pynvml, **patches).start()
    if tool == "nvitop":
        import nvitop.api.libnvml as nvitop_nvml

        for name, fake in patches.items():  # nvitop re-wraps some NVML calls in its own module
            setattr(nvitop_nvml, name, fake)
        from nvitop.cli import main as nvitop_main

        sys.argv = ["nvitop", "--interval", "1"]
        sys.exit(nvitop_main())
    from gpuwise.cli.app import main as gpuwise_main

    gpuwise_main(["monitor", "--interval", "1"])


def tui_core_pct(tool: str, seconds: float, columns: int) -> float:
    """% of one core ``tool``'s live view uses over ``seconds`` after the warm-up, on a pseudo-terminal."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    import psutil

    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm-256color"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", tool],
        stdin=child_fd, stdout=child_fd, stderr=child_fd, env=env, start_new_session=True,
    )  # fmt: skip
    os.close(child_fd)

    def drain(seconds: float) -> None:  # read the screen so the child never blocks on a full terminal
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([main_fd], [], [], 0.1)[0]:
                try:
                    os.read(main_fd, 65536)
                except OSError:
                    return

    try:
        drain(WARM_UP_S)
        ps = psutil.Process(proc.pid)
        before, start = ps.cpu_times(), time.monotonic()
        drain(seconds)
        after, wall = ps.cpu_times(), time.monotonic() - start
        if proc.poll() is not None:
            raise SystemExit(f"{tool} exited early (status {proc.returncode})")
    finally:
        proc.kill()
        proc.wait()
        os.close(main_fd)
    return 100 * ((after.user + after.system) - (before.user + before.system)) / wall


def side_by_side(seconds: float, rounds: int, columns: int) -> dict:
    """The live views' CPU at 1 Hz, alternating gpuwise and nvitop, ``rounds`` times each; medians."""
    runs: dict[str, list[float]] = {"gpuwise": [], "nvitop": []}
    for _ in range(rounds):
        for tool in runs:
            runs[tool].append(round(tui_core_pct(tool, seconds, columns), 3))
    medians = {tool: statistics.median(values) for tool, values in runs.items()}
    print(
        f"live view at 1 Hz, {GPUS} faked GPUs, {columns} columns, {seconds:g} s x {rounds}: "
        f"gpuwise {medians['gpuwise']:.2f} % of a core (runs {runs['gpuwise']}), "
        f"nvitop 1.7.2 {medians['nvitop']:.2f} % (runs {runs['nvitop']})"
    )
    return {
        "tui_seconds": seconds,
        "tui_rounds": rounds,
        "tui_columns": columns,
        "tui_core_pct_gpuwise": medians["gpuwise"],
        "tui_core_pct_nvitop": medians["nvitop"],
        "tui_runs_gpuwise": runs["gpuwise"],
        "tui_runs_nvitop": runs["nvitop"],
        "tui_at_or_below_nvitop": medians["gpuwise"] <= medians["nvitop"],
    }


def cpu_s() -> float:
    return time.process_time()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=600)
    parser.add_argument("--tui-seconds", type=float, default=30.0, help="0: skip the live-view comparison")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--columns", type=int, default=120)
    parser.add_argument("--child", choices=["gpuwise", "nvitop"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    fake = FakeNvml(bench_gpus())
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
    if args.tui_seconds > 0:
        figures.update(side_by_side(args.tui_seconds, args.rounds, args.columns))
    print(
        f"8 GPUs at 1 Hz (faked NVML): {total * 1000:.2f} ms CPU per tick = {total * 100:.2f} % of one core"
    )
    print(f"  sampling {sampling * 1000:.2f} ms, recording (SQLite + downsampling) {recording * 1000:.2f} ms")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
