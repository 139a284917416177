"""What the DataLoader hook learns: each loader's settings, batches served, and how much of a batch
wait the training thread spent on the CPU (loading in-process) rather than blocked (waiting on workers)."""

from __future__ import annotations

import weakref
from time import perf_counter, thread_time
from typing import Any

LOADER_CPU_SAMPLE_EVERY = 8  # one batch wait in this many also reads the thread's CPU clock (a syscall)


def _no_loader() -> None:
    return None


class LoaderWatch:
    """The DataLoader hook's notes: each loader's settings and batch count, and the training thread's CPU time
    over the sampled batch waits.
    """

    def __init__(self) -> None:
        self.loaders: dict[tuple, dict[str, Any]] = {}
        self._ref: Any = _no_loader  # weak reference to the DataLoader iterator seen last
        self._info: dict[str, Any] = {}
        self._cpu_s = 0.0  # thread CPU and wall seconds of the sampled batch waits
        self._wall_s = 0.0

    def wait_begins(self, it: Any) -> float | None:
        """A wait for the next batch starts; returns the thread CPU clock when this wait is sampled."""
        if self._ref() is not it:
            self._note(it)
        info = self._info
        info["batches"] += 1
        if info["batches"] % LOADER_CPU_SAMPLE_EVERY == 1:
            self._wall_s -= perf_counter()
            return thread_time()
        return None

    def wait_ends(self, cpu0: float | None) -> None:
        """The batch wait ends; ``cpu0`` (from ``wait_begins``; None: not
        sampled) adds its CPU and wall time.
        """
        if cpu0 is not None:
            self._cpu_s += thread_time() - cpu0
            self._wall_s += perf_counter()

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
        try:
            self._ref = weakref.ref(it)
        except TypeError:  # an iterator without weak references: note it again next time
            self._ref = _no_loader

    def summary(self) -> dict[str, Any] | None:
        """The loader that served the most batches, with the training thread's CPU share of its waits."""
        loader = max(self.loaders.values(), key=lambda d: d["batches"], default=None)
        if loader is not None and self._wall_s > 0:
            share = 100.0 * min(1.0, self._cpu_s / self._wall_s)
            loader = {**loader, "main_thread_cpu_share_pct": round(share, 1)}
        return loader


__all__ = ["LoaderWatch"]
