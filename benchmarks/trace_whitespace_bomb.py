"""A gzip whitespace bomb through `gpuwise trace`: seconds, bounded memory, one line when it has no events.

Issue #26: a 4.7 MB gzip holding 1 GiB of whitespace inside ``traceEvents`` ran past 300 s at 2 GB RSS
(the batch reader rescanned and re-concatenated a growing buffer). The reader now drops whitespace
between events as it arrives and doubles the buffer when no event ends in it, so time is linear.

Two files are streamed into a temporary directory (nothing of the size is held in memory here):
- ``events``: two kernel events with SIZE of whitespace between them;
- ``empty``: ``{"traceEvents": [ SIZE of whitespace ]}``: no event at all.
Each is run through the real CLI (`python -m gpuwise trace FILE`) in a fresh process.

    python benchmarks/trace_whitespace_bomb.py [--gib 1]

Prints per file: compressed MB, wall seconds, peak RSS (MB), exit status and stdout/stderr line
counts; LAST line: {"gib": G, "events_wall_s": X, "events_cpu_s": C, "empty_wall_s": Y, "max_rss_mb": Z}
(CPU seconds beside wall: on a shared machine the wall time measures the neighbours too).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENT = b'{"ph":"X","cat":"kernel","name":"k","ts":%d,"dur":2,"tid":7,"pid":0,"args":{"stream":7}}'
BLOCK = b" \n\t\r" * (1 << 18)  # 1 MiB of the four JSON whitespace bytes


def write_bomb(path: Path, gib: float, with_events: bool) -> int:
    """Stream the bomb into ``path`` (gzip level 1); return its compressed size in bytes."""
    blocks = int(gib * 1024)
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b'{"traceEvents": [')
        if with_events:
            out.write(EVENT % 1)
        for _ in range(blocks):
            out.write(BLOCK)
        out.write((b"," + EVENT % 5 if with_events else b"") + b"]}")
    return path.stat().st_size


def run(path: Path) -> dict:
    """`python -m gpuwise trace FILE` in a fresh process: wall time, peak RSS of children, output."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwise", "trace", str(path)], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_mb = max(usage.ru_maxrss, before) / 1024
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime - cpu0,
        "rss_mb": rss_mb,
        "exit": proc.returncode,
        "stdout_lines": len(proc.stdout.splitlines()),
        "stderr_lines": len(proc.stderr.splitlines()),
        "first_line": (proc.stderr or proc.stdout).strip().splitlines()[0][:120]
        if (proc.stderr or proc.stdout).strip()
        else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=1.0, help="whitespace inside traceEvents (GiB)")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpuwise-bomb-") as tmp:
        for label, with_events in (("events", True), ("empty", False)):
            path = Path(tmp) / f"bomb-{label}.json.gz"
            size = write_bomb(path, args.gib, with_events)
            r = run(path)
            results[label] = r
            print(
                f"{label:6} {args.gib:g} GiB whitespace, {size / 1e6:.1f} MB gzip: {r['wall_s']:.1f} s wall "
                f"({r['cpu_s']:.1f} s CPU), "
                f"peak RSS {r['rss_mb']:.0f} MB, exit {r['exit']}, "
                f"{r['stdout_lines']} stdout / {r['stderr_lines']} stderr lines: {r['first_line']}",
                flush=True,
            )
            path.unlink()
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    print(
        json.dumps(
            {
                "gib": args.gib,
                "events_wall_s": round(results["events"]["wall_s"], 2),
                "events_cpu_s": round(results["events"]["cpu_s"], 2),
                "empty_wall_s": round(results["empty"]["wall_s"], 2),
                "max_rss_mb": round(max(r["rss_mb"] for r in results.values())),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
