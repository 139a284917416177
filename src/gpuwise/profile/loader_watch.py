"""What the DataLoader hook learns: each loader's settings, batches served, and whether loading is
CPU-bound or waits on I/O.

Whether a loader computes or waits is read from the loading side's own scheduler counters
(``/proc/<tid>/schedstat``: nanoseconds on a CPU and nanoseconds runnable but waiting for a core), not
from the training thread's CPU share alone: on a busy machine a CPU-bound loader spends much of its
wall time waiting for a core, which a CPU share reads as "I/O". With ``num_workers=0`` the loading side
is the training thread during its batch waits; with workers, it is the worker processes over the window.
The "busy" share is the time on a CPU over the time *not* spent waiting for a core (on a quiet
machine that is the wall time): near 100 % for CPU-bound loading on any machine load, low for sleeps,
disk or network reads (measured at load 14-17 on 2 cores: a loader with a 2 ms read per sample was on a
CPU 9 % of its waits and runnable 60 %: 22 % busy, I/O; a CPU-bound one 14 % and 86 %: 100 %).
"""

from __future__ import annotations

import weakref
from time import perf_counter, thread_time
from typing import Any

LOADER_CPU_SAMPLE_EVERY = 8  # one batch wait in this many also reads the thread's CPU clock (a syscall)
BATCH_WALK_DEPTH = 3  # a sampled batch's tensors are counted this deep (a tuple of dicts of tensors) ...
BATCH_WALK_ITEMS = 64  # ... and over this many items per level (a batch is a few fields, not a list of rows)


def _no_loader() -> None:
    return None


def read_schedstat(path: str) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting for a core) of one task; None where Linux's
    schedstat is not available."""
    try:
        with open(path, "rb") as fh:
            on_cpu_ns, runq_ns = fh.read().split()[:2]
        return int(on_cpu_ns) / 1e9, int(runq_ns) / 1e9
    except (OSError, ValueError):
        return None


def _thread_schedstat() -> tuple[float, float] | None:
    return read_schedstat("/proc/thread-self/schedstat")


class LoaderWatch:
    """The DataLoader hook's notes: each loader's settings and batch count, the training thread's CPU and
    run-queue time over the sampled batch waits, and the workers' over the window.
    """

    def __init__(self) -> None:
        self.loaders: dict[tuple, dict[str, Any]] = {}
        self._ref: Any = _no_loader  # weak reference to the DataLoader iterator seen last
        self._info: dict[str, Any] = {}
        self._cpu_s = 0.0  # thread CPU, run-queue and wall seconds of the sampled batch waits
        self._runq_s = 0.0
        self._wall_s = 0.0
        self._sched0: tuple[float, float] | None = None
        self._sched_ok = True
        # worker pid -> (first, last) readings of (wall s, on-CPU s, run-queue s)
        self._workers: dict[int, list[tuple[float, float, float]]] = {}
        self._it_workers: list[int] = []

    def wait_begins(self, it: Any) -> float | None:
        """A wait for the next batch starts; returns the thread CPU clock when this wait is sampled."""
        if self._ref() is not it:
            self._note(it)
        info = self._info
        info["batches"] += 1
        if info["batches"] % LOADER_CPU_SAMPLE_EVERY == 1:
            if self._it_workers:
                self._read_workers()
            self._sched0 = _thread_schedstat() if self._sched_ok else None
            self._sched_ok = self._sched0 is not None
            self._wall_s -= perf_counter()
            return thread_time()
        return None

    def wait_ends(self, cpu0: float | None, batch: Any = None) -> None:
        """The batch wait ends; ``cpu0`` (from ``wait_begins``; None: not
        sampled) adds its CPU, run-queue and wall time, and ``batch``'s tensors and bytes are noted (what
        handing it from a worker process would move).
        """
        if cpu0 is not None:
            if batch is not None:
                tensors, nbytes = batch_tensors(batch)
                self._info["batch_tensors"], self._info["batch_bytes"] = tensors, nbytes
            self._cpu_s += thread_time() - cpu0
            self._wall_s += perf_counter()
            sched1 = _thread_schedstat() if self._sched0 is not None else None
            if sched1 is not None and self._sched0 is not None:
                self._runq_s += max(0.0, sched1[1] - self._sched0[1])
            else:
                self._sched_ok = False

    def queue_bound(self) -> int:
        """The most batches the worker processes of the iterator seen last can hold ready
        (``num_workers * prefetch_factor``): what they queue while the training thread is paused; 0
        without an active multi-process iterator."""
        if self._ref() is None or not self._it_workers:
            return 0
        workers, prefetch = self._info.get("num_workers") or 0, self._info.get("prefetch_factor") or 2
        return int(workers) * int(prefetch)

    def ready_batches(self) -> int | None:
        """Batches the worker processes of the iterator seen last hold ready and the training thread has
        not taken (its result queue plus results that arrived out of order); None without an active
        multi-process iterator, or where the queue cannot tell its size (macOS)."""
        it = self._ref()
        if it is None or not self._it_workers:
            return None
        try:
            queued = int(it._data_queue.qsize())
        except (AttributeError, NotImplementedError, OSError, TypeError):
            return None
        stash = getattr(it, "_task_info", None) or {}
        return queued + sum(1 for v in stash.values() if isinstance(v, tuple) and len(v) == 2)

    def _read_workers(self) -> None:
        now = perf_counter()
        for pid in self._it_workers:
            reading = read_schedstat(f"/proc/{pid}/schedstat")
            if reading is None:
                continue
            row = (now, *reading)
            seen = self._workers.setdefault(pid, [row, row])
            seen[1] = row

    def _note(self, it: Any) -> None:
        """A DataLoader iterator not seen last: find (or start) the entry for its loader settings."""
        key = (
            id(getattr(it, "_dataset", None)),
            getattr(it, "_num_workers", None),
            getattr(it, "_pin_memory", None),
        )
        info = self.loaders.get(key)
        if info is None:
            sampler = getattr(it, "_index_sampler", None)
            info = {
                "dataset": type(getattr(it, "_dataset", None)).__name__,
                "num_workers": getattr(it, "_num_workers", None),
                "pin_memory": getattr(it, "_pin_memory", None),
                "prefetch_factor": getattr(it, "_prefetch_factor", None),
                "persistent_workers": getattr(it, "_persistent_workers", None),
                "batch_size": getattr(sampler, "batch_size", None),
                "batches": 0,
            }
            self.loaders[key] = info
        self._info = info
        self._it_workers = [p.pid for p in getattr(it, "_workers", None) or [] if getattr(p, "pid", None)]
        try:
            self._ref = weakref.ref(it)
        except TypeError:  # an iterator without weak references: note it again next time
            self._ref = _no_loader

    def _workers_busy_pct(self) -> tuple[float | None, float | None]:
        """(busy %, of which waiting for a core %) of the worker processes over the window."""
        wall = cpu = runq = 0.0
        for first, last in self._workers.values():
            wall += last[0] - first[0]
            cpu += last[1] - first[1]
            runq += last[2] - first[2]
        if wall <= 0.05:
            return None, None
        return _busy_pct(cpu, runq, wall), 100.0 * min(1.0, runq / wall)

    def summary(self) -> dict[str, Any] | None:
        """The loader that served the most batches, with the loading side's CPU and run-queue shares."""
        loader = max(self.loaders.values(), key=lambda d: d["batches"], default=None)
        if loader is None:
            return None
        out = dict(loader)
        if self._wall_s > 0:
            out["main_thread_cpu_share_pct"] = round(100.0 * min(1.0, self._cpu_s / self._wall_s), 1)
        if loader.get("num_workers") == 0 and self._wall_s > 0 and self._sched_ok:
            out["loader_busy_pct"] = round(_busy_pct(self._cpu_s, self._runq_s, self._wall_s), 1)
            out["loader_runq_pct"] = round(100.0 * min(1.0, self._runq_s / self._wall_s), 1)
        elif loader.get("num_workers"):
            busy_pct, runq_pct = self._workers_busy_pct()
            if busy_pct is not None and runq_pct is not None:
                out["loader_busy_pct"] = round(busy_pct, 1)
                out["loader_runq_pct"] = round(runq_pct, 1)
        out["cpu_pressure_pct"] = cpu_pressure_pct()
        return out


def batch_tensors(batch: Any, depth: int = 0) -> tuple[int, int]:
    """(tensors, bytes) in a batch as a DataLoader yields it (tensors in tuples, lists and dicts, nested up
    to ``BATCH_WALK_DEPTH`` levels, at most ``BATCH_WALK_ITEMS`` items each): a worker hands each tensor
    over on its own (one shared-memory storage apiece), so the count and the bytes size the hand-off."""
    nbytes = getattr(batch, "nbytes", None)
    if isinstance(nbytes, int) and hasattr(batch, "untyped_storage"):
        return 1, nbytes
    if depth >= BATCH_WALK_DEPTH:
        return 0, 0
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    tensors = total = 0
    for i, item in enumerate(items):
        if i >= BATCH_WALK_ITEMS:
            break
        t, b = batch_tensors(item, depth + 1)
        tensors, total = tensors + t, total + b
    return tensors, total


def _busy_pct(cpu_s: float, runq_s: float, wall_s: float) -> float:
    """On-CPU time over the time not spent waiting for a core (%): what the wall time would be on an
    idle machine."""
    running = max(wall_s - runq_s, cpu_s, 1e-9)
    return 100.0 * min(1.0, cpu_s / running)


def cpu_pressure_pct() -> float | None:
    """The machine's run queue: the share of the last 10 s some runnable task waited for a core
    (``/proc/pressure/cpu``, Linux 4.20+); None where it is not available."""
    try:
        with open("/proc/pressure/cpu") as fh:
            first = fh.readline().split()
        return float(dict(part.split("=") for part in first[1:])["avg10"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


__all__ = ["LoaderWatch", "batch_tensors", "cpu_pressure_pct", "read_schedstat"]
