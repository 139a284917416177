"""NumPy loaded with one OpenBLAS thread, and the environment left exactly as it was.

OpenBLAS starts a pool of one thread per core when NumPy loads (its import costs ~2x the CPU with the
pool: 0.12-0.14 s against 0.06-0.08 s on the 2-core development machine), and the trace analysis never
multiplies matrices: its NumPy work is elementwise. OpenBLAS reads ``OPENBLAS_NUM_THREADS`` once, while
NumPy loads; so the variable is set just for that import and removed right after it. No process started
later (the user's program under `gpuwise profile` or `gpuwise tune`, a pool worker, a shell) ever sees it,
and a value the user set is left alone (theirs wins).

This module imports nothing heavy: a process pool's worker imports it (its initializer, `worker_init`)
before anything has loaded NumPy.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["BLAS_THREADS_ENV", "import_numpy_with_one_blas_thread", "worker_init"]

BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def import_numpy_with_one_blas_thread() -> None:
    """Import NumPy now, with one OpenBLAS thread unless the user chose a number; the environment is
    the same before and after (nothing happens when NumPy is already loaded: the pool exists)."""
    if "numpy" in sys.modules:
        return
    ours = BLAS_THREADS_ENV not in os.environ  # else the user's number, kept
    if ours:
        os.environ[BLAS_THREADS_ENV] = "1"
    try:
        import numpy  # noqa: F401  # OpenBLAS reads the variable here, and never again
    finally:
        if ours:
            os.environ.pop(BLAS_THREADS_ENV, None)


def worker_init() -> None:
    """A trace pool worker's initializer (`gpuwise.trace.parallel`): Ctrl-C is the driver's (it stops
    the workers itself), and NumPy loads with one BLAS thread (one pool per worker would oversubscribe
    the cores the workers already fill)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import_numpy_with_one_blas_thread()
