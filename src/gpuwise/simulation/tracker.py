"""A small peak-memory tracker for fake-tensor runs: every tensor storage, once, as the CUDA
allocator sees it.

Why not ``torch.distributed._tools.mem_tracker.MemTracker``: it walks every module on every op and
took 53 s (full fine-tune) to 414 s (LoRA) for a Llama-3-8B step here. This tracker does the least
work per op: it records each new output *storage* once (views share their storage), rounds it to
the CUDA caching allocator's 512-byte block, and frees it when the storage object dies (a weakref
callback). Categories are decided afterwards from what each storage turned out to be (a parameter,
a ``.grad``, optimizer state, a KV cache, or an activation that outlived the forward), so the hot
path stays a dict insert.

Peaks are kept per phase. A snapshot of the live set is taken lazily: only when memory is about to
fall from a new peak (the first free after it) or when the phase ends, so it costs one dict copy per
local maximum rather than per op.
"""

from __future__ import annotations

import re
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpuwise.simulation.flops import is_attention, op_flops

__all__ = ["CATEGORIES", "CUDA_BLOCK_BYTES", "MemoryTracker", "PhaseRecord", "cuda_block_bytes"]


# The CUDA caching allocator hands out blocks in multiples of 512 bytes (c10/cuda/CUDACachingAllocator.cpp,
# kMinBlockSize); torch.cuda.max_memory_allocated() counts those rounded blocks.
CUDA_BLOCK_BYTES = 512

# logits_loss: what the output head and the loss keep from the forward (fp32 logits copy, log-softmax output).
CATEGORIES = (
    "parameters",
    "gradients",
    "optimizer_state",
    "kv_cache",
    "activations",
    "logits_loss",
    "temporaries",
)
_LAYER_INDEX = re.compile(r"\.\d+(?=\.|$)")  # the first index in a module path is the layer (blocks.3.mlp)


def cuda_block_bytes(nbytes: int, block: int = CUDA_BLOCK_BYTES) -> int:
    """Size the CUDA caching allocator hands out for a request (0 stays 0: no allocation)."""
    if nbytes <= 0:
        return 0
    return -(-nbytes // block) * block


@dataclass
class PhaseRecord:
    """What one phase (forward, backward, optimizer, prefill, decode) did to memory."""

    name: str
    start_bytes: int
    peak_bytes: int
    end_bytes: int = 0
    flops: int = 0
    kernels: int = 0  # ops that would launch a GPU kernel (views and allocations excluded)
    memory_bytes: int = (
        0  # bytes read + written by kernels without a FLOP formula (elementwise, norms, copies)
    )
    compute_ops: Counter = field(
        default_factory=Counter
    )  # (kind, flops, bytes) -> count, kind: matmul | attention
    live_at_peak: dict[int, int] = field(default_factory=dict)  # storage id -> bytes, at the peak
    where_at_peak: str = ""  # the module running when the peak was reached
    start_ns: int = 0  # wall clock (time.time_ns), to line a real run's profiler events up with phases
    end_ns: int = 0


class MemoryTracker(TorchDispatchMode):
    """Counts live tensor storages under a fake-tensor run; enter it *inside* ``FakeTensorMode``."""

    def __init__(
        self,
        module_names: dict[int, str] | None = None,
        block_bytes: int = CUDA_BLOCK_BYTES,
        head_modules: set[str] | None = None,
    ) -> None:
        super().__init__()
        self.head_modules = head_modules or set()  # modules whose forward output is logits/loss
        self.block_bytes = block_bytes  # 1 counts exact sizes (as the CPU allocator does)
        self.current_bytes = 0
        self._next_id = 0
        self._by_storage: dict[int, tuple[int, weakref.ref]] = {}  # id(storage) -> (storage id, ref)
        self.live: dict[int, int] = {}  # storage id -> rounded bytes
        self.born_in: dict[int, str] = {}  # storage id -> phase it was allocated in
        self.owner: dict[int, str] = {}  # storage id -> module that allocated it (forward phases only)
        self.tags: dict[int, str] = {}  # storage id -> category known for sure (parameters, gradients, ...)
        self.phases: dict[str, PhaseRecord] = {}
        self.phase = "setup"
        self._record: PhaseRecord | None = None
        self._dirty = False  # the live set is at the phase peak and has not been copied yet
        self._attribute = False
        self.module_names = module_names or {}
        self.module_stack: list[str] = []
        self.failed_op: str = ""
        self.survivors: dict[str, dict[int, int]] = {}  # phase -> live storages born in it, at its end
        self._outside = ""
        self.untracked_bytes = (
            0  # storages a GPU run keeps outside PyTorch's allocator (paged optimizer state)
        )

    # -- dispatch -------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except Exception:
            self.failed_op = str(func)
            raise
        record = self._record
        if record is not None and func not in _NO_KERNEL and not func.is_view and func.namespace != "prim":
            self._count_kernel(record, func, args, kwargs, out)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self._track(t.untyped_storage())
        return out

    @staticmethod
    def _count_kernel(record: PhaseRecord, func, args, kwargs, out) -> None:
        nbytes = 0
        for t in tree_flatten((args, kwargs, out))[0]:
            if isinstance(t, torch.Tensor):
                nbytes += t.numel() * t.element_size()
        record.kernels += 1
        flops = op_flops(func, args, kwargs, out)
        if flops:
            record.flops += flops
            record.compute_ops["attention" if is_attention(func) else "matmul", flops, nbytes] += 1
        else:
            record.memory_bytes += nbytes

    def _track(self, storage: torch.UntypedStorage) -> None:
        key = id(storage)
        known = self._by_storage.get(key)
        if known is not None:
            sid, ref = known
            if ref() is storage:
                self._resize(sid, cuda_block_bytes(storage.nbytes(), self.block_bytes))
                return
        sid = self._next_id
        self._next_id += 1
        nbytes = cuda_block_bytes(storage.nbytes(), self.block_bytes)
        self._by_storage[key] = (sid, weakref.ref(storage, partial(self._freed, key, sid)))
        self.live[sid] = nbytes
        self.born_in[sid] = self.phase
        if self._attribute and self.module_stack:
            self.owner[sid] = self.module_stack[-1]
        self._grow(nbytes)

    def _grow(self, nbytes: int) -> None:
        self.current_bytes += nbytes
        record = self._record
        if record is not None and self.current_bytes > record.peak_bytes:
            record.peak_bytes = self.current_bytes
            self._dirty = True

    def _resize(self, sid: int, nbytes: int) -> None:
        old = self.live.get(sid)
        if old is None or old == nbytes:
            return
        if nbytes < old:
            self._snapshot_if_dirty()
        self.live[sid] = nbytes
        self.current_bytes -= old
        self._grow(nbytes)

    def _freed(self, key: int, sid: int, _ref: weakref.ref) -> None:
        known = self._by_storage.get(key)
        if known is not None and known[0] == sid:
            del self._by_storage[key]
        if sid not in self.live:
            return
        self._snapshot_if_dirty()  # the state at the peak still holds this storage
        self.current_bytes -= self.live.pop(sid)

    def _snapshot_if_dirty(self) -> None:
        if self._dirty and self._record is not None:
            self._record.live_at_peak = dict(self.live)
            self._record.where_at_peak = self.module_stack[-1] if self.module_stack else self._outside
            self._dirty = False

    # -- phases, tags, modules ------------------------------------------------------------------
    @contextmanager
    def track_phase(
        self, name: str, attribute_modules: bool = False, outside_modules: str = ""
    ) -> Iterator[PhaseRecord]:
        """Measure a phase; ``attribute_modules`` records which module allocated each storage;
        ``outside_modules`` names where the peak is when no module forward is running (e.g. autograd)."""
        record = PhaseRecord(name, self.current_bytes, self.current_bytes, start_ns=time.time_ns())
        self._outside = outside_modules
        previous = (self.phase, self._record, self._attribute)
        self.phase, self._record, self._attribute = name, record, attribute_modules
        self._dirty = True
        self.module_stack.clear()  # checkpoint recomputation can stop early, leaving hooks unpopped
        try:
            yield record
        finally:
            self._snapshot_if_dirty()
            record.end_bytes = self.current_bytes
            record.end_ns = time.time_ns()
            self.survivors[name] = {sid: b for sid, b in self.live.items() if self.born_in.get(sid) == name}
            self.phases[name] = record
            self.phase, self._record, self._attribute = previous

    def tag(self, tensors: Iterable[torch.Tensor], category: str) -> int:
        """Mark the storages behind ``tensors`` as ``category``; returns their tracked bytes."""
        total = 0
        seen: set[int] = set()
        for t in tensors:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            known = self._by_storage.get(id(t.untyped_storage()))
            if known is None or known[0] in seen:
                continue
            sid = known[0]
            seen.add(sid)
            self.tags[sid] = category
            total += self.live.get(sid, 0)
        return total

    def untrack(self, tensors: Iterable[torch.Tensor]) -> int:
        """Stop counting storages that a GPU run would not hold in device memory (e.g. paged state)."""
        freed = 0
        for t in tensors:
            known = self._by_storage.pop(id(t.untyped_storage()), None)
            if known is None:
                continue
            nbytes = self.live.pop(known[0], 0)
            self.current_bytes -= nbytes
            freed += nbytes
        self.untracked_bytes += freed
        return freed

    def category(self, sid: int) -> str:
        """The memory component of storage ``sid`` (weights, gradients, optimizer state, activations,
        logits_loss, temporaries), from its tag or where it was born."""
        tag = self.tags.get(sid)
        if tag is not None:
            return tag
        born = self.born_in.get(sid, "setup")
        if born == "setup":
            return "activations"  # the input batch
        if born in _FORWARD_PHASES and sid in self.survivors.get(born, {}):
            # forward outputs still alive when the forward ended: saved for backward, or kept
            return "logits_loss" if self.owner.get(sid) in self.head_modules else "activations"
        return "temporaries"

    def breakdown(self, live: dict[int, int]) -> dict[str, int]:
        """Bytes by category for a live set (e.g. a phase's ``live_at_peak``)."""
        totals = dict.fromkeys(CATEGORIES, 0)
        for sid, nbytes in live.items():
            totals[self.category(sid)] += nbytes
        return totals

    def top_activation_modules(self, phase: str, limit: int = 10) -> list[dict[str, Any]]:
        """Modules by the bytes they allocated in ``phase``, layer indices folded (``layers.*.mlp``).

        After a training forward these are the tensors saved for backward (what outlived the
        forward); for inference, which saves nothing, the untagged tensors live at the phase peak.
        """
        record = self.phases.get(phase)
        if record is None:
            return []
        if "backward" in self.phases:
            owned = self.survivors.get(phase, {})
        else:
            owned = {sid: b for sid, b in record.live_at_peak.items() if self.born_in.get(sid) == phase}
        by_pattern: dict[str, int] = defaultdict(int)
        instances: dict[str, set[str]] = defaultdict(set)
        for sid, nbytes in owned.items():
            if self.tags.get(sid):
                continue
            name = self.owner.get(sid, "(model inputs and outputs)")
            pattern = _LAYER_INDEX.sub(".*", name, count=1)
            by_pattern[pattern] += nbytes
            instances[pattern].add(name)
        ranked = sorted(by_pattern.items(), key=lambda kv: kv[1], reverse=True)[:limit]
        return [{"module": p, "instances": len(instances[p]), "activation_bytes": b} for p, b in ranked]

    # module hooks: which module is running (for attribution and for error messages)
    @contextmanager
    def watching_modules(self) -> Iterator[None]:
        """Context manager: keep a stack of the running modules, so activations are attributed to the
        module that made them."""
        from torch.nn.modules import module as nn_module

        def pre(module, _args):
            self.module_stack.append(self.module_names.get(id(module), type(module).__name__))

        def post(_module, _args, _out):
            if self.module_stack:
                self.module_stack.pop()

        handles = [
            nn_module.register_module_forward_pre_hook(pre),
            nn_module.register_module_forward_hook(post),
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()


_FORWARD_PHASES = {"forward", "prefill"}
_aten = torch.ops.aten
# Ops that allocate or relabel memory without running a kernel.
_NO_KERNEL = {
    _aten.empty.memory_format,
    _aten.empty_like.default,
    _aten.empty_strided.default,
    _aten.new_empty.default,
    _aten.new_empty_strided.default,
    _aten.lift_fresh.default,
    _aten._unsafe_view.default,
    _aten._local_scalar_dense.default,
    _aten.set_.source_Storage_storage_offset,
}
