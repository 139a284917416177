"""How long a training thread waits for a worker process's thread to wake and answer, by CPU load.

A DataLoader worker hands each batch over in round trips the training thread waits on (its queue, then one
file-descriptor request per tensor storage); on busy cores each wakes a worker thread that must first get
a core. This probe does the same round trip: a process computing ~1 ms (a training step's Python) sends a
message to a sleeping peer process and waits for the echo, with 0, 1, 2 and 4 CPU burners beside it.
The figures behind ``LOADER_WAKEUP_WAIT_S`` / ``LOADER_WAKEUP_WAIT_MAX_S`` in gpuwise.diagnose.thresholds
(wall milliseconds per round trip; the machine's load average is printed, other users move it).
Usage: python benchmarks/wakeup_latency.py [--trips N]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time


def _peer(conn) -> None:
    while (message := conn.recv()) is not None:
        conn.send(message)


def _round_trips(trips: int) -> list[float]:
    here, there = mp.Pipe()
    peer = mp.Process(target=_peer, args=(there,))
    peer.start()
    out = []
    for i in range(trips):
        x = 0
        for j in range(20000):  # ~1 ms of Python between round trips, as a training step
            x += j
        t0 = time.perf_counter()
        here.send(i)
        here.recv()
        out.append(time.perf_counter() - t0)
    here.send(None)
    peer.join()
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trips", type=int, default=300)
    args = parser.parse_args()
    for burners in (0, 1, 2, 4):
        procs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass"]) for _ in range(burners)]
        try:
            rtts = _round_trips(args.trips)
        finally:
            for proc in procs:  # each ended by its own pid
                proc.kill()
                proc.wait()
        p90 = rtts[int(0.9 * (len(rtts) - 1))]
        print(
            f"burners {burners}: round trip mean {1000 * statistics.fmean(rtts):.3f} ms, "
            f"p50 {1000 * statistics.median(rtts):.3f} ms, p90 {1000 * p90:.3f} ms "
            f"(load {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
