"""Time each rank spends waiting for its peers, so a live DDP run can name its straggler.

Synchronous data parallelism makes every rank's step equally long: the fast ranks wait at each
collective for the slow one, so step times cannot tell them apart. The time spent *waiting* can:
the rank that waits least is the one the others wait for (diagnose's ``straggler`` rule). Two
places hold that wait, and both are timed without changing what the program computes:
- explicit ``torch.distributed`` collectives (``dist.all_reduce(loss)``, ``barrier``, DDP's buffer
  broadcast): wrapped at Python level; the original runs once with the same arguments and its
  result is returned as is. Only synchronous calls count (an ``async_op=True`` call returns a
  ``Work`` at once; its wait happens elsewhere), and only the outermost of nested calls.
- DDP's gradient all-reduce: the reducer starts bucket all-reduces during backward and waits for
  them in its ``finalize_backward``, a callback the autograd engine runs once backward's graph is
  done. A pre-hook on the DDP output's ``grad_fn`` (the first of the model's nodes that backward
  reaches) queues a callback ahead of the reducer's; that callback queues a second one, which runs
  after the reducer's. The time between the two is the reducer's wait. No DDP comm hook is
  registered (the user may have one) and no gradient is read or written.
On CUDA the reducer's wait is a stream wait, not a host one, so this measures the host side only.
"""

from __future__ import annotations

import functools
from threading import get_ident
from time import perf_counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.profile.recorder import Recorder

# The blocking collectives of torch.distributed (those a training loop or a torch module calls).
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "_broadcast_coalesced",  # DDP's buffer broadcast before each forward (dist._broadcast_coalesced)
)


class CollectiveWatch:
    """Collective and DDP-backward waits of the training thread, as (end time, seconds) pairs."""

    def __init__(self, recorder: Recorder) -> None:
        self.rec = recorder
        self.ddp_waits: list[tuple[float, float]] = []
        self.calls: list[tuple[float, float]] = []
        self._patches: list[tuple[Any, str, Any]] = []
        self._depth = 0
        self._graph_task = -1  # the backward whose wait is being timed (one per graph task)

    # -- install / uninstall -------------------------------------------------------------------------
    def install(self) -> None:
        """Wrap the synchronous ``torch.distributed`` collectives and DDP's forward (for the reducer's wait);
        does nothing when torch.distributed is not available.
        """
        import torch

        dist = torch.distributed
        if not dist.is_available():
            return
        from torch.distributed import distributed_c10d
        from torch.nn.parallel import DistributedDataParallel

        self._is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
        self._queue_callback = torch.autograd.Variable._execution_engine.queue_callback
        self._task_id = getattr(torch._C, "_current_graph_task_id", lambda: -2)
        for owner in (dist, distributed_c10d):
            for name in COLLECTIVES:
                if callable(owner.__dict__.get(name)):
                    self._patch(owner, name, self._timed_collective)
        self._patch(DistributedDataParallel, "forward", self._ddp_forward)

    def uninstall(self) -> None:
        """Restore every wrapped function, newest first."""
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        self._patches.clear()

    def _patch(self, owner: Any, name: str, make_wrapper) -> None:
        original = owner.__dict__[name]
        setattr(owner, name, functools.update_wrapper(make_wrapper(original), original))
        self._patches.append((owner, name, original))

    # -- explicit collectives ------------------------------------------------------------------------
    def _timed_collective(self, original):
        rec, calls = self.rec, self.calls
        compiling = self._is_compiling
        watch = self

        def collective(*args, **kwargs):
            if compiling() or watch._depth or (rec.tid != get_ident() and not rec.on_thread()):
                return original(*args, **kwargs)
            watch._depth += 1
            t0 = perf_counter()
            try:
                out = original(*args, **kwargs)
            finally:
                watch._depth -= 1
            t1 = perf_counter()
            if out is None:  # a synchronous call; async ones return a Work to wait on later
                calls.append((t1, t1 - t0))
            return out

        return collective

    # -- DDP's gradient all-reduce -------------------------------------------------------------------
    def _ddp_forward(self, original):
        rec = self.rec
        compiling = self._is_compiling
        pre_hook = self._backward_reaches_model

        def forward(module, *args, **kwargs):
            out = original(module, *args, **kwargs)
            if compiling() or not rec.active:
                return out
            try:
                for node in _grad_fns(out):
                    node.register_prehook(pre_hook)
            except Exception as exc:
                rec.contain("DDP forward hook", exc)
            return out

        return forward

    def _backward_reaches_model(self, grad_outputs):
        """Backward reached the model's output: queue the callback that runs before DDP's finalize."""
        try:
            task = self._task_id()
            if task != self._graph_task or task == -2:  # once per backward (a model called twice)
                self._graph_task = task
                self._queue_callback(self._graph_done)
        except Exception as exc:
            self.rec.contain("DDP backward hook", exc)
        return None

    def _graph_done(self) -> None:
        """Every gradient is computed; DDP's finalize (queued later) runs next, then ``_finalized``."""
        t0 = perf_counter()
        try:
            self._queue_callback(functools.partial(self._finalized, t0))
        except Exception as exc:
            self.rec.contain("DDP backward hook", exc)

    def _finalized(self, t0: float) -> None:
        t1 = perf_counter()
        self.ddp_waits.append((t1, t1 - t0))

    # -- output --------------------------------------------------------------------------------------
    def annotate(self, steps: list[dict[str, Any]], origin: float) -> None:
        """Add each step's wait (``comm_wait_s``) to its record, once any wait was timed in this process;
        a wait belongs to the step during which it ended (step starts are relative to ``origin``)."""
        events = sorted(list(self.ddp_waits) + list(self.calls))
        if not events or not steps:
            return
        i = 0
        for step in steps:
            start = origin + step["start_s"]
            end = start + step["wall_s"]
            while i < len(events) and events[i][0] < start:
                i += 1
            waited = 0.0
            while i < len(events) and events[i][0] <= end:
                waited += events[i][1]
                i += 1
            step["comm_wait_s"] = waited


def _grad_fns(out: Any, limit: int = 4) -> list[Any]:
    """The autograd nodes of the first output tensors (a tensor, or in a tuple/list/dict): backward
    may start from any of them (a loss on the logits, or on an auxiliary output)."""
    found: list[Any] = []
    stack = [out]
    while stack and len(found) < limit:
        item = stack.pop(0)
        node = getattr(item, "grad_fn", None)
        if node is not None:
            found.append(node)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


__all__ = ["CollectiveWatch"]
