"""`gpuwise monitor --record` as a session: open the store, sample until stopped, close everything.

The loop itself is `gpuwise.monitor.recorder` (headless) or a live view that calls back on each sample;
this module owns what wraps it — SIGTERM handled like Ctrl-C (a service manager stops the recorder
cleanly, the tick being written is its last), and the sampler and the store closed on every exit path.
The live view (a renderer, a higher layer) is handed in by the caller as ``view``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwise.monitor import recorder
from gpuwise.store.history import HistoryStore

if TYPE_CHECKING:
    from gpuwise.monitor.sampler import Snapshot
    from gpuwise.monitor.tiers import Retention

__all__ = ["LiveView", "record"]

# Draws the live view from the sampler until the user quits, calling the second argument on each sample.
LiveView = Callable[[recorder.ResilientSampler, Callable[["Snapshot"], object]], object]


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def record(
    interval_s: float,
    store_path: Path | None,
    retention: Retention,
    view: LiveView | None = None,
    on_start: Callable[[int, Path], None] | None = None,
) -> None:
    """Sample every ``interval_s`` seconds into the history store at ``store_path`` (None: the default
    file) until Ctrl-C or SIGTERM, each tick its own transaction, rolled up and pruned by ``retention``.

    ``view`` None records headless (``--quiet``); otherwise it draws the live view and records through
    its per-sample callback. The store's writer lock is held until the store closes (GpuwiseError when
    another recorder holds it). ``on_start(gpu_count, store_path)`` is called once both are open (the CLI
    says what is being recorded where)."""
    sampler = recorder.ResilientSampler()
    try:  # one recorder per store: a second one is refused here, naming the first one's pid
        store = HistoryStore.open(store_path, writer=True)
    except BaseException:
        sampler.close()
        raise
    sampler.identity = store.last_identity  # a GPU lost before we started keeps its recorded identity
    rec = recorder.Recorder(store, interval_s, retention)
    signal.signal(signal.SIGTERM, _stop)
    if on_start is not None:
        on_start(sampler.count, store.path)
    try:
        if view is None:
            recorder.run(sampler, rec, interval_s)
        else:
            view(sampler, rec.tick)
    except KeyboardInterrupt:
        pass
    finally:
        sampler.close()
        store.close()
