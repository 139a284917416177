"""A tune trial's side, inside the user's process: apply the trial's knobs when torch is imported.

It lives in ``profile``, not ``tune``, because it runs in the profiled child (``profile/child.py``) and
the profiler must not import the tuner: the tuner only sets the environment, this module applies it.
``gpuwise tune`` runs each trial under the profiler (``profile/child.py``) with ``GPUWISE_TUNE`` set to
the knobs as JSON; the child calls ``apply`` right after ``import torch`` finishes, before the script
builds its model or loaders. Without ``GPUWISE_TUNE`` nothing here runs, so ``gpuwise profile`` is
unchanged. Like the rest of the child's side, only the standard library is imported at module level.

What each knob touches, and why it cannot change what the script computes unless marked:
- ``num_workers``, ``persistent_workers``, ``prefetch_factor``, ``pin_memory``: every
  ``DataLoader(...)`` the script builds (its own arguments rewritten before ``__init__``). Not for
  an ``IterableDataset``: without per-worker sharding in the dataset, N workers yield every sample N times.
- ``threads``: ``torch.set_num_threads`` now, and the script's own later calls keep the knob's value.
- ``tf32``, ``cudnn_benchmark``: torch's backend flags (rounding of fp32 matmuls / algorithm choice).
- numerics (verified against the baseline's losses by the tuner): ``autocast`` (bf16/fp16 around the
  outermost module call), ``channels_last`` (the outermost module and its 4-D inputs), ``compile``
  (``torch.compile`` of the outermost module's forward with the knob's backend: ``inductor`` by default).
The first ``losses`` scalar tensors passed to ``torch.autograd.backward`` (where ``loss.backward()``
arrives) are written to ``losses-<pid>.txt`` (on a GPU reading one waits for the step, so only the
first few, and only when the tuner asks).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

ENV = "GPUWISE_TUNE"

_report: dict[str, Any] = {"loaders": 0, "iterable_skipped": 0, "threads_kept": 0}


def config() -> dict[str, Any] | None:
    """The tune trial's configuration from ``GPUWISE_TUNE`` (knobs, output directory, losses to capture); None
    outside a tune trial.
    """
    raw = os.environ.get(ENV)
    return json.loads(raw) if raw else None


def apply() -> None:
    """Called by the profiler's child right after ``import torch``; errors are reported, not raised."""
    cfg = config()
    if cfg is None:
        return
    import torch

    knobs: dict[str, Any] = cfg.get("knobs") or {}
    out_dir = cfg["out_dir"]
    for name, step in (
        ("loader", _patch_loader),
        ("threads", _set_threads),
        ("backends", _set_backends),
        ("modules", _patch_module_call),
        ("losses", _capture_losses),
    ):
        try:
            step(torch, knobs, cfg)
        except Exception as exc:  # a knob that cannot be applied is reported, the script still runs
            _report.setdefault("errors", []).append(f"{name}: {type(exc).__name__}: {exc}")
    _write_report(out_dir)
    import atexit

    atexit.register(_write_report, out_dir)


def _write_report(out_dir: str) -> None:
    try:
        with open(os.path.join(out_dir, f"tune-{os.getpid()}.json"), "w") as fh:
            json.dump(_report, fh)
    except OSError:
        pass


LOADER_KNOBS = ("num_workers", "persistent_workers", "prefetch_factor", "pin_memory")


def _patch_loader(torch: Any, knobs: dict[str, Any], cfg: dict[str, Any]) -> None:
    if not any(k in knobs for k in LOADER_KNOBS):
        return
    import inspect

    from torch.utils.data import DataLoader, IterableDataset

    original = DataLoader.__init__
    signature = inspect.signature(original)
    on_gpu = torch.cuda.is_available()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            given = dict(bound.arguments)
            given.pop("self")
            if isinstance(given.get("dataset"), IterableDataset) and "num_workers" in knobs:
                _report["iterable_skipped"] += 1
            else:
                _rewrite(given, knobs, on_gpu)
                _report["loaders"] += 1
                return original(self, **given)
        except TypeError:
            pass  # arguments this torch's DataLoader does not take: let it raise its own error
        return original(self, *args, **kwargs)

    DataLoader.__init__ = __init__  # type: ignore[method-assign]


def _rewrite(given: dict[str, Any], knobs: dict[str, Any], on_gpu: bool) -> None:
    if "num_workers" in knobs:
        given["num_workers"] = int(knobs["num_workers"])
    workers = given.get("num_workers") or 0
    if workers > 0:  # DataLoader refuses both without workers
        if "persistent_workers" in knobs:
            given["persistent_workers"] = bool(knobs["persistent_workers"])
        if "prefetch_factor" in knobs:
            given["prefetch_factor"] = int(knobs["prefetch_factor"])
    if "pin_memory" in knobs and on_gpu:  # without a GPU there is nothing to pin for
        given["pin_memory"] = bool(knobs["pin_memory"])


def _set_threads(torch: Any, knobs: dict[str, Any], cfg: dict[str, Any]) -> None:
    if "threads" not in knobs:
        return
    wanted = int(knobs["threads"])
    original = torch.set_num_threads
    original(wanted)
    main_pid = os.getpid()

    def set_num_threads(n: int) -> None:
        if os.getpid() != main_pid:  # a forked DataLoader worker sets 1 thread: let it
            original(n)
            return
        _report["threads_kept"] += 1  # the script's own call would undo the trial

    torch.set_num_threads = set_num_threads


def _set_backends(torch: Any, knobs: dict[str, Any], cfg: dict[str, Any]) -> None:
    if knobs.get("tf32"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if knobs.get("cudnn_benchmark"):
        torch.backends.cudnn.benchmark = True


def _patch_module_call(torch: Any, knobs: dict[str, Any], cfg: dict[str, Any]) -> None:
    """Autocast and channels_last around the outermost module call (the model's forward), so the
    script's own ``model(x)`` runs as if it had written ``with torch.autocast(...)``."""
    amp = knobs.get("autocast")
    channels_last = bool(knobs.get("channels_last"))
    backend = knobs.get("compile")
    if not amp and not channels_last and not backend:
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[amp] if amp else None
    module_cls = torch.nn.Module
    original = module_cls.__call__
    local = threading.local()
    converted: set[int] = set()
    compiled: set[int] = set()

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(local, "depth", 0):
            return original(self, *args, **kwargs)
        local.depth = 1
        try:
            if channels_last:
                if id(self) not in converted:
                    converted.add(id(self))
                    self.to(memory_format=torch.channels_last)
                args = tuple(
                    a.contiguous(memory_format=torch.channels_last)
                    if isinstance(a, torch.Tensor) and a.dim() == 4
                    else a
                    for a in args
                )
            if backend and id(self) not in compiled:
                compiled.add(id(self))
                # the instance's forward, compiled: its submodules are traced inside it
                self.forward = torch.compile(self.forward, backend=backend)
            if dtype is None:
                return original(self, *args, **kwargs)
            with torch.autocast(device_type=device, dtype=dtype):
                return original(self, *args, **kwargs)
        finally:
            local.depth = 0

    module_cls.__call__ = __call__


def _capture_losses(torch: Any, knobs: dict[str, Any], cfg: dict[str, Any]) -> None:
    """``torch.autograd.backward`` is where ``loss.backward()`` (and a direct call) arrives; the first
    scalar it gets in each call is the loss."""
    count = int(cfg.get("losses") or 0)
    if count <= 0:
        return
    path = os.path.join(cfg["out_dir"], f"losses-{os.getpid()}.txt")
    original = torch.autograd.backward
    seen = [0]

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        first = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
        if seen[0] < count and isinstance(first, torch.Tensor) and first.numel() == 1:
            seen[0] += 1
            try:
                value = float(first.detach().float().cpu())
                with open(path, "a") as fh:
                    fh.write(f"{value!r}\n")
            except Exception as exc:
                print(f"gpuwise tune: could not read the loss ({exc})", file=sys.stderr)
        return original(tensors, *args, **kwargs)

    torch.autograd.backward = backward


__all__ = ["apply", "config"]
