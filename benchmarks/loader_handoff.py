"""What handing a batch from a DataLoader worker process to the training thread costs, in CPU seconds.

With ``num_workers > 0`` the worker pickles each batch into shared memory and the training thread
receives it (pipe read, unpickling, one file-descriptor round trip per tensor storage, mmap): work the
training thread does in ``DataLoader.__next__`` even when a batch is ready, and which a run with
``num_workers=0`` never shows. The consumer here sleeps between batches so the worker stays ahead
(the queue is non-empty): the training thread's CPU inside ``__next__`` is then exactly the hand-off.
The time ``__next__`` spends blocked (wall less CPU less the wait for a core, from
``/proc/thread-self/schedstat``) is the round trip to the worker per storage, also load-free. The
worker's extra CPU per batch (the schedstat of *all* its threads over the batches, less the same batches
fetched in-process) is the sending side: the worker's main loop collates into shared memory, its queue's
feeder thread pickles and writes the pipe, and its resource-sharer thread answers the training thread's
file-descriptor request per storage (reading the main thread alone missed the two threads: ~0.8 of
~1.2 ms per batch of 2 small tensors).

A second table runs a loader alone (no training step, a dataset doing ``--sample-cost`` passes of CPU work
per sample, as benchmarks/real_scripts/lightning_like.py does) in-process and with 1 and 2 workers: wall
time per batch, and CPU per batch on the training thread and in the workers. With one worker the worker is
the pipeline's bottleneck: its wall per batch is the load plus the sending side, not the load alone.

CPU seconds (``time.thread_time``, ``/proc/<pid>/schedstat``) are what it compares, so a loaded
machine stretches the wall figures but not these. Prints one row per batch shape and a least-squares
fit ``cpu_s = base + per_tensor * tensors + per_mib * MiB`` for the training thread, the figures behind
``LOADER_HANDOFF_*`` in ``gpuwise.diagnose.thresholds``.
Usage: python benchmarks/loader_handoff.py [--batches N] [--sample-cost K] [--burners N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
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


class Work(Dataset):
    """Samples as lightning_like.py makes them: ``cost`` passes of CPU work on a 32x32 tensor, then
    128 floats and an int label."""

    def __init__(self, cost: int) -> None:
        self.cost = cost

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int):
        x = torch.randn(32, 32, generator=torch.Generator().manual_seed(i))
        for _ in range(self.cost):
            x = torch.tanh(x @ x.T / 32)
        return x.flatten()[:128], i % 10


def _task_cpu_s(pid: int) -> tuple[float, float]:
    """(main thread, other threads) CPU seconds of process ``pid``, from each thread's schedstat (the
    process's own /proc/<pid>/schedstat is its main thread only)."""
    main = rest = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                cpu = int(fh.read().split()[0]) / 1e9
        except OSError:  # a thread that just ended
            continue
        if int(tid) == pid:
            main += cpu
        else:
            rest += cpu
    return main, rest


def _schedstat_cpu_s(pid: int) -> float:
    return sum(_task_cpu_s(pid))


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


def pipeline(cost: int, workers: int, batches: int) -> dict[str, float]:
    """A loader alone, taken as fast as it delivers: wall ms per batch, training thread CPU ms per batch,
    and the workers' main-thread and other-thread CPU ms per batch (summed over workers)."""
    it = iter(DataLoader(Work(cost), batch_size=BATCH, num_workers=workers, persistent_workers=workers > 0))
    for _ in range(10):  # warm: workers started, queues full
        next(it)
    pids = [p.pid for p in it._workers] if workers else []
    before = [_task_cpu_s(pid) for pid in pids]
    w0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(batches):
        next(it)
    wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
    after = [_task_cpu_s(pid) for pid in pids]
    del it
    return {
        "wall_ms": 1000 * wall / batches,
        "main_ms": 1000 * cpu / batches,
        "worker_main_ms": 1000 * sum(a[0] - b[0] for a, b in zip(after, before, strict=True)) / batches,
        "worker_threads_ms": 1000 * sum(a[1] - b[1] for a, b in zip(after, before, strict=True)) / batches,
    }


def pipelines(cost: int, batches: int) -> None:
    """The loader-alone table: in-process, then 1 and 2 workers."""
    local = None
    for workers in (0, 1, 2):
        m = pipeline(cost, workers, batches)
        worker_ms = m["worker_main_ms"] + m["worker_threads_ms"]
        if local is None:
            local = m
            print(
                f"--sample-cost {cost}, in-process: {m['wall_ms']:.3f} ms wall per batch, "
                f"{m['main_ms']:.3f} ms CPU",
                flush=True,
            )
            continue
        print(
            f"--sample-cost {cost}, {workers} worker(s): {m['wall_ms']:.3f} ms wall per batch "
            f"({m['wall_ms'] / local['wall_ms']:.2f}x in-process); "
            f"training thread {m['main_ms']:.3f} ms CPU; "
            f"workers {worker_ms:.3f} ms CPU (main threads {m['worker_main_ms']:.3f}, feeder and "
            f"resource-sharer threads {m['worker_threads_ms']:.3f}): sending side "
            f"+{worker_ms - local['main_ms']:.3f} ms CPU over the in-process load",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--sample-cost", type=int, default=6, help="CPU work per sample in the loader table")
    parser.add_argument("--burners", type=int, default=0, help="run under this many CPU-spinning processes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    burners = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass"]) for _ in range(args.burners)]
    try:
        return _run(args)
    finally:
        for proc in burners:  # each ended by its own pid
            proc.kill()
            proc.wait()


def _run(args: argparse.Namespace) -> int:
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs, {args.burners} burner(s); "
        f"torch {torch.__version__}"
    )
    for cost in sorted({args.sample_cost, 0}, reverse=True):
        pipelines(cost, 5 * args.batches)
    rows, sends = [], []
    for shape, count in SHAPES:
        m = measure(shape, count, args.batches)
        tensors = count + 1  # the collated label is a tensor too
        mib = BATCH * count * int(np.prod(shape)) * 4 / 2**20
        rows.append((tensors, mib, m["main_ms"]))
        sends.append((tensors, mib, m["worker_ms"] - m["fetch_ms"]))
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
    y = np.array([ms for *_, ms in sends])
    (base, per_tensor, per_mib), *_ = np.linalg.lstsq(a, y, rcond=None)
    print(
        f"fit (worker, sending side, CPU): {base:.3f} ms + {per_tensor:.3f} ms/tensor + {per_mib:.3f} ms/MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
