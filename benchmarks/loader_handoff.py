"""What handing a batch from a DataLoader worker process to the training thread costs, in CPU seconds.

With ``num_workers > 0`` the worker pickles each batch into shared memory and the training thread
receives it (pipe read, unpickling, one file-descriptor round trip per tensor storage, mmap): work the
training thread does in ``DataLoader.__next__`` even when a batch is ready, and which a run with
``num_workers=0`` never shows. The consumer here sleeps between batches so the worker stays ahead
(the queue is non-empty): the training thread's CPU inside ``__next__`` is then exactly the hand-off.
The time ``__next__`` spends blocked (wall less CPU less the wait for a core, from
``/proc/thread-self/schedstat``) is the round trip to the worker per storage, also load-free. The
worker's extra CPU per batch (its schedstat over the batches, less the same batches fetched in-process)
is the sending side.

CPU seconds (``time.thread_time``, ``/proc/<pid>/schedstat``) are what it compares, so a loaded
machine stretches the wall figures but not these. Prints one row per batch shape and a least-squares
fit ``cpu_s = base + per_tensor * tensors + per_mib * MiB`` for the training thread, the figures behind
``LOADER_HANDOFF_*`` in ``gpuwise.diagnose.thresholds``.
Usage: python benchmarks/loader_handoff.py [--batches N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

BATCH = 16
SHAPES = (((128,), 1), ((128,), 3), ((128,), 7), ((3, 64, 64), 1), ((3, 128, 128), 1), ((3, 224, 224), 1))


class Fixed(Dataset):
    """Samples of ``count`` float tensors of ``shape`` plus an int label: no work per sample."""

    def __init__(self, shape: tuple[int, ...], count: int) -> None:
        self.shape, self.count = shape, count

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int):
        return (*[torch.zeros(self.shape) for _ in range(self.count)], i % 10)


def _schedstat_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat") as fh:
        return int(fh.read().split()[0]) / 1e9


def _thread_runq_s() -> float:
    """Seconds this thread was runnable but waiting for a core (schedstat's second field)."""
    with open("/proc/thread-self/schedstat") as fh:
        return int(fh.read().split()[1]) / 1e9


def measure(shape: tuple[int, ...], count: int, batches: int) -> dict[str, float]:
    """Median training-thread CPU per batch in ``__next__`` (queue non-empty), the worker's CPU per batch,
    and the in-process fetch CPU per batch, all in ms."""
    dataset = Fixed(shape, count)
    local = iter(DataLoader(dataset, batch_size=BATCH, num_workers=0))
    t0 = time.thread_time()
    for _ in range(batches):
        next(local)
    fetch_ms = 1000 * (time.thread_time() - t0) / batches
    it = iter(
        DataLoader(dataset, batch_size=BATCH, num_workers=1, persistent_workers=True, prefetch_factor=4)
    )
    next(it)
    pid = it._workers[0].pid
    time.sleep(0.3)
    cpu, blocked, worker0 = [], [], _schedstat_cpu_s(pid)
    for _ in range(batches):
        time.sleep(0.01)  # a slow step: the worker stays ahead
        q0, w0, c0 = _thread_runq_s(), time.perf_counter(), time.thread_time()
        next(it)
        c1, w1, q1 = time.thread_time(), time.perf_counter(), _thread_runq_s()
        cpu.append(c1 - c0)
        # off a CPU and not waiting for one: blocked on the worker (the fd round trip per storage)
        blocked.append(max(0.0, (w1 - w0) - (c1 - c0) - (q1 - q0)))
    worker_ms = 1000 * (_schedstat_cpu_s(pid) - worker0) / batches
    del it
    return {
        "main_ms": 1000 * statistics.median(cpu),
        "blocked_ms": 1000 * statistics.median(blocked),
        "worker_ms": worker_ms,
        "fetch_ms": fetch_ms,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; torch {torch.__version__}")
    rows = []
    for shape, count in SHAPES:
        m = measure(shape, count, args.batches)
        tensors = count + 1  # the collated label is a tensor too
        mib = BATCH * count * int(np.prod(shape)) * 4 / 2**20
        rows.append((tensors, mib, m["main_ms"]))
        print(
            f"{count} x {shape} per sample, batch {BATCH}: {tensors} tensors, {mib:.2f} MiB: training thread "
            f"{m['main_ms']:.3f} ms CPU/batch in __next__ (+{m['blocked_ms']:.3f} ms blocked); "
            f"worker {m['worker_ms']:.3f} ms CPU/batch "
            f"(in-process fetch {m['fetch_ms']:.3f} ms: sending side +{m['worker_ms'] - m['fetch_ms']:.3f})",
            flush=True,
        )
    a = np.array([[1.0, t, b] for t, b, _ in rows])
    y = np.array([ms for _, _, ms in rows])
    (base, per_tensor, per_mib), *_ = np.linalg.lstsq(a, y, rcond=None)
    print(f"fit (training thread, CPU): {base:.3f} ms + {per_tensor:.3f} ms/tensor + {per_mib:.3f} ms/MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
