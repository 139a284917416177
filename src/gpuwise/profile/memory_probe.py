"""Live memory at a step boundary: what the memory_growth rule compares step to step.

- CUDA: ``torch.cuda.memory_allocated()`` — bytes held by live tensors (no sync, a counter read).
- CPU (Linux/glibc): bytes the C heap has handed out and not got back (``mallinfo2``: in-use chunks
  plus mmapped blocks). PyTorch's CPU allocator takes tensor storage from malloc, so this counts
  every live tensor, including activations an autograd graph keeps alive from C++, which no
  Python-level object scan can see. It also counts the interpreter's own heap (~100 MB), so small
  leaks look smaller on CPU than they would on a GPU.
- elsewhere: the process resident set size (psutil), which also counts freed-but-cached pages.

``mallinfo2`` walks the allocator's free lists, so its cost grows with heap fragmentation; if a
read takes longer than MAX_READ_S the probe switches to RSS for the rest of the run (see notes).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


MAX_READ_S = 50e-6


def _rss_reader() -> Callable[[], float] | None:
    try:
        import psutil

        proc = psutil.Process()
        return lambda: float(proc.memory_info().rss)
    except Exception:  # noqa: BLE001
        return None


def _glibc_heap_in_use() -> Callable[[], float] | None:
    try:
        libc = ctypes.CDLL(None)
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    fn.argtypes = []

    def read() -> float:
        info = fn()
        return float(info.uordblks + info.hblkhd)

    return read


def live_memory_probe(device: str) -> tuple[str, Callable[[], float] | None]:
    """(name of the measure, reader) for this device; reader is None when nothing is available."""
    if device == "cuda":
        import torch

        return "torch.cuda.memory_allocated", lambda: float(torch.cuda.memory_allocated())
    heap = _glibc_heap_in_use()
    if heap is not None:
        t0 = time.perf_counter()
        heap()
        if time.perf_counter() - t0 <= MAX_READ_S:
            return "glibc heap in use (mallinfo2)", heap
    rss = _rss_reader()
    return ("process RSS (psutil)", rss) if rss is not None else ("not available", None)
