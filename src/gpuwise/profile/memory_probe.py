"""Live memory at a step boundary: what the memory_growth rule compares step to step.

- CUDA: ``torch.cuda.memory_allocated()`` — bytes held by live tensors (no sync, a counter read).
- CPU (Linux/glibc): bytes the C heap has handed out and not got back (``mallinfo2``: in-use chunks
  plus mmapped blocks). PyTorch's CPU allocator takes tensor storage from malloc, so this counts
  every live tensor, including activations an autograd graph keeps alive from C++, which no
  Python-level object scan can see. It also counts the interpreter's own heap (~100 MB), so small
  leaks look smaller on CPU than they would on a GPU.
- otherwise: the process resident set size (``/proc/self/statm``, else psutil), which also counts
  freed pages the allocator keeps.

``mallinfo2`` walks the allocator's free lists, so its cost grows with the number of free chunks:
about 0.2 µs per chunk when a training step has just evicted the caches (20 µs at 120 chunks, 46 µs
at 230, measured here; the same read is 1-2 µs warm). Its *time* also depends on machine load, so
the choice of measure must not: a heap with more than MAX_FREE_CHUNKS free chunks switches the run to
RSS (a 2 µs read), a count that load does not change. Reads are spaced by the cheapest of the last
three (a read can wait for a preempted vCPU) so that the probe uses about MEMORY_PROBE_BUDGET of the
run's time.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


# More free chunks than this (a read of ~0.4 ms, spaced ~0.8 s apart by the budget, too sparse for a short
# window): use RSS for the rest of the run.
MAX_FREE_CHUNKS = 2000
COST_WINDOW = 3  # reads whose cheapest cost paces the probe
# Readings a window of known length gets at least, whatever the time budget allows: a trend needs points
# (a 20-step window at 15 ms steps got 3 readings from the budget alone, too few to test a slope). At
# most this many extra reads of 2-50 µs per window: well under a millisecond per run.
MIN_READINGS_PER_WINDOW = 12
MEMORY_PROBE_BUDGET = (
    0.0005  # share of the run's time the probe may use: after a read costing c, wait c / budget
)
HEAP_MEASURE = "glibc heap in use (mallinfo2)"

_statm: tuple[int, int, int] | None = (
    None  # (pid, fd of /proc/self/statm, page size), opened once per process
)


def _statm_rss() -> float:
    global _statm
    pid = os.getpid()
    if _statm is None or _statm[0] != pid:  # a forked child reopens: the fd points at its parent's file
        _statm = (pid, os.open("/proc/self/statm", os.O_RDONLY), os.sysconf("SC_PAGE_SIZE"))
    return float(int(os.pread(_statm[1], 128, 0).split()[1]) * _statm[2])


def rss_reader() -> tuple[str, Callable[[], float]] | None:
    """(name, reader) of the cheapest RSS measure here, or None."""
    try:
        _statm_rss()
        return "process RSS (/proc/self/statm)", _statm_rss
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil

        proc = psutil.Process()
        return "process RSS (psutil)", lambda: float(proc.memory_info().rss)
    except Exception:
        return None


class HeapInUse:
    """glibc's heap in use (``mallinfo2``); ``free_chunks`` is the free-list length seen by the last read."""

    def __init__(self) -> None:
        libc = ctypes.PyDLL(None)  # keeps the GIL: a microseconds call, and its timing is then its own
        self._fn = libc.mallinfo2
        self._fn.restype = _MallInfo2
        self._fn.argtypes = []
        self.free_chunks = 0

    def __call__(self) -> float:
        info = self._fn()
        self.free_chunks = info.ordblks + info.smblks
        return float(info.uordblks + info.hblkhd)


def _glibc_heap_in_use() -> HeapInUse | None:
    try:
        return HeapInUse()
    except (OSError, AttributeError):
        return None


def live_memory_probe(device: str) -> tuple[str, Callable[[], float] | None]:
    """(name of the measure, reader) for this device; reader is None when nothing is available."""
    if device == "cuda":
        import torch

        return "torch.cuda.memory_allocated", lambda: float(torch.cuda.memory_allocated())
    heap = _glibc_heap_in_use()
    if heap is not None:
        heap()
        if heap.free_chunks <= MAX_FREE_CHUNKS:
            return HEAP_MEASURE, heap
    return rss_reader() or ("not available", None)


__all__ = [
    "COST_WINDOW",
    "MAX_FREE_CHUNKS",
    "MEMORY_PROBE_BUDGET",
    "MIN_READINGS_PER_WINDOW",
    "HeapInUse",
    "live_memory_probe",
    "rss_reader",
]
