"""Attach to a PyTorch program without changing it: torch's global hooks plus a few wrappers.

What is hooked, and why it is enough to split a step into phases:
- ``DataLoader`` iteration (``_BaseDataLoaderIter.__next__``, the one method every loader iterator
  shares): time blocked waiting for the next batch, and the loader's settings;
- module forward: torch's *global* forward pre/post hooks while the root modules are discovered
  (warm-up), then hooks on those roots only, because global hooks push every submodule call
  onto torch's slow path;
- backward: ``torch.autograd.backward`` / ``torch.autograd.grad`` (``Tensor.backward`` calls the former);
- optimizer: torch's global optimizer step pre/post hooks; the post hook is the step boundary;
- on CUDA only: ``Tensor.to``/``.cuda`` host->device copies (bytes, pinned or pageable) and the
  calls that block the host on the device (``.item()``, ``.tolist()``, ``.cpu()``, ``synchronize``).

Every wrapper calls the original exactly once and returns (or raises) exactly what it did; our own
bookkeeping runs inside ``try/except`` and reports errors through ``Recorder.contain``. A hook's
work is a thread check (``rec.tid == get_ident()``) and ``rec.mark(code)``: an append to the
recorder's event log (see ``phases.py``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from threading import get_ident
from time import perf_counter
from typing import TYPE_CHECKING, Any

from gpuwise.profile.phases import (
    DATA_IN,
    DATA_OUT,
    EXIT,
    FORWARD_IN,
    FORWARD_OUT,
    H2D_BYTES,
    H2D_IN,
    H2D_OUT,
    H2D_PAGEABLE_BYTES,
    OPTIMIZER_IN,
    OPTIMIZER_OUT,
    PHASES,
    SYNC,
)

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.profile.recorder import Recorder

_MISSING = object()


class Instrumentation:
    """The hooks and wrappers of one recorder, and everything needed to remove them again.

    ``copies_and_syncs`` (CUDA) also wraps host→device copies and synchronizing calls. ``roots`` holds the
    root modules found during warm-up (weak references), after which the global module hooks give way to
    hooks on those roots.
    """

    def __init__(self, recorder: Recorder, *, copies_and_syncs: bool) -> None:
        self.rec = recorder
        self.copies_and_syncs = copies_and_syncs
        self._handles: list[Any] = []
        self._global_handles: list[Any] = []
        self._optimizer_handles: list[Any] = []
        self._root_handles: list[Any] = []
        self._patches: list[tuple[Any, str, Any]] = []  # (owner, name, original or _MISSING)
        self.depth = 0
        # > 0 while the training thread is inside DataLoader.__next__: module calls there (transforms that
        # are nn.Modules, a collate running a model) are data loading, not forward, and never roots
        self.data_depth = 0
        # 'file function' of the user code that calls the root forward (found in warm-up): host time
        # sampled inside that function is the step's own code, not batch preparation, whatever its name
        self.forward_callers: set[str] = set()
        self.roots: dict[int, weakref.ref] = {}
        self.global_module_hooks = False
        self._compiled_calls: list[tuple[weakref.ref, Any, Any]] = []  # (module, compiled call, our wrapper)

    # -- install / uninstall -------------------------------------------------------------------
    def install(self) -> None:
        """Register torch's global module and optimizer hooks and wrap DataLoader iteration,
        ``Module.compile``, ``autograd.backward``/``grad`` and, with ``copies_and_syncs``, copies and
        synchronizing calls.
        """
        import torch
        from torch.optim import optimizer as optim_mod
        from torch.utils.data import dataloader as dl_mod

        self._is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
        self._install_global_module_hooks()
        # Kept apart: torch iterates the live hook dicts, so these cannot be removed from inside a hook.
        self._optimizer_handles = [
            optim_mod.register_optimizer_step_pre_hook(self._opt_pre),
            optim_mod.register_optimizer_step_post_hook(self._opt_post),
        ]
        self._patch(dl_mod._BaseDataLoaderIter, "__next__", self._wrap_next)
        self._patch(torch.nn.Module, "compile", self._wrap_module_compile)
        self._patch(torch.autograd, "backward", self._wrap_phase("backward", starts_step=True))
        self._patch(torch.autograd, "grad", self._wrap_phase("backward"))
        if self.copies_and_syncs:
            self._patch(torch.Tensor, "to", self._wrap_copy)
            self._patch(torch.Tensor, "cuda", self._wrap_copy)
            for name in ("item", "tolist", "cpu"):
                self._patch(torch.Tensor, name, self._wrap_sync)
            if hasattr(torch, "cuda"):
                self._patch(torch.cuda, "synchronize", self._wrap_sync_fn)

    def uninstall(self, from_hook: bool = False) -> None:
        """Remove hooks and restore patched functions. ``from_hook``: we are inside an optimizer hook,
        so the optimizer hooks stay registered (inert once the recorder is inactive) until a later call."""
        # Dynamo guards a compiled root on the global module hooks: removing them would recompile it once
        # the profiler detaches, so they stay registered, inert (the recorder is inactive from here on).
        compiled = any(_is_compiled(ref()) for ref in self.roots.values())
        handles = self._handles + ([] if compiled else self._global_handles) + self._root_handles
        if not from_hook:
            handles += self._optimizer_handles
            self._optimizer_handles = []
        for handle in handles:
            with contextlib.suppress(Exception):
                handle.remove()
        self._handles.clear()
        self._global_handles.clear()
        self._root_handles.clear()
        for owner, name, original in reversed(self._patches):
            if original is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._patches.clear()
        for ref, inner, wrapper in self._compiled_calls:
            module = ref()
            if module is not None and getattr(module, "_compiled_call_impl", None) is wrapper:
                module._compiled_call_impl = inner
        self._compiled_calls.clear()
        self.global_module_hooks = False

    def has_optimizer_hooks(self) -> bool:
        """True while the optimizer step hooks are registered (they stay
        after an uninstall from inside one).
        """
        return bool(self._optimizer_handles)

    def _patch(self, owner: Any, name: str, make_wrapper) -> None:
        original_attr = (
            owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name)
        )
        original = getattr(owner, name)
        setattr(owner, name, make_wrapper(original))
        self._patches.append((owner, name, original_attr))

    # -- module forward ---------------------------------------------------------------------------
    def _install_global_module_hooks(self) -> None:
        from torch.nn.modules import module as nn_module

        self._global_handles.append(nn_module.register_module_forward_pre_hook(self._fwd_pre))
        self._global_handles.append(nn_module.register_module_forward_hook(self._fwd_post, always_call=True))
        self.global_module_hooks = True

    def narrow_to_roots(self) -> None:
        """Swap the global module hooks for hooks on the discovered root modules only.

        Not when a root is compiled (``torch.compile(model)``): Dynamo guards on the global hooks, so
        removing them would recompile the model, and inside its graph they are no-ops anyway."""
        if not self.global_module_hooks or self.depth != 0 or not self.roots:
            return
        if any(_is_compiled(ref()) for ref in self.roots.values()):
            return
        for handle in self._global_handles:
            handle.remove()
        self._global_handles.clear()
        self.global_module_hooks = False
        for ref in self.roots.values():
            module = ref()
            if module is None:
                continue
            self._root_handles.append(module.register_forward_pre_hook(self._fwd_pre))
            self._root_handles.append(module.register_forward_hook(self._fwd_post, always_call=True))

    def _fwd_pre(self, module, args):
        if self._is_compiling():  # traced by Dynamo: a no-op, so the compiled graph stays whole
            return None
        rec = self.rec
        if self.data_depth:
            return None
        if rec.tid == get_ident() or rec.on_thread():
            self.depth += 1
            if self.depth == 1:
                try:
                    if self.global_module_hooks and id(module) not in self.roots:  # warm-up: find the roots
                        self.roots[id(module)] = weakref.ref(module)
                    if self.global_module_hooks and len(self.forward_callers) < 8:
                        self._note_forward_caller()
                    if not rec.device_checked:
                        rec.inspect_model(module)
                    rec.mark(FORWARD_IN)
                except Exception as exc:
                    rec.contain("forward hook", exc)
        return None

    def _note_forward_caller(self) -> None:
        frames = getattr(self.rec, "frames", None)
        if frames is None:
            return
        user, _ = frames.describe(sys._getframe(2))
        if user:
            where, _, function = user.partition(" ")
            self.forward_callers.add(f"{where.split(':')[0]} {function}")

    def _fwd_post(self, module, args, output):
        if self._is_compiling():
            return None
        rec = self.rec
        if self.data_depth:
            return None
        if (rec.tid == get_ident() or rec.on_thread()) and self.depth > 0:
            self.depth -= 1
            if self.depth == 0:
                try:
                    rec.mark(FORWARD_OUT)
                except Exception as exc:
                    rec.contain("forward hook", exc)
        return None

    def _wrap_module_compile(self, original):
        """``model.compile()`` compiles the module's own call, hooks included, so its forward hooks
        are no-ops in the graph: time the compiled call from outside instead, as one forward."""
        instrumentation = self

        def compile(module, *args, **kwargs):
            out = original(module, *args, **kwargs)
            try:
                inner = getattr(module, "_compiled_call_impl", None)
                if inner is not None:
                    wrapper = instrumentation._timed_compiled_call(module, inner)
                    module._compiled_call_impl = wrapper
                    instrumentation._compiled_calls.append((weakref.ref(module), inner, wrapper))
            except Exception as exc:
                instrumentation.rec.contain("compile hook", exc)
            return out

        return functools.update_wrapper(compile, original)

    def _timed_compiled_call(self, module, inner):
        ref = weakref.ref(module)
        pre, post = self._fwd_pre, self._fwd_post

        def compiled_call(*args, **kwargs):
            owner = ref()
            pre(owner, args)
            try:
                return inner(*args, **kwargs)
            finally:
                post(owner, args, None)

        return functools.update_wrapper(compiled_call, inner)

    # -- optimizer ----------------------------------------------------------------------------------
    def _opt_pre(self, optimizer, args, kwargs):
        rec = self.rec
        if rec.tid == get_ident() or rec.on_thread():
            try:
                rec.mark(OPTIMIZER_IN)
            except Exception as exc:
                rec.contain("optimizer hook", exc)
        return None

    def _opt_post(self, optimizer, args, kwargs):
        rec = self.rec
        if rec.tid == get_ident() or rec.on_thread():
            try:
                rec.mark(OPTIMIZER_OUT)
                rec.auto_boundary()
            except Exception as exc:
                rec.contain("optimizer hook", exc)

    # -- wrappers -------------------------------------------------------------------------------------
    def _wrap_next(self, original):
        rec = self.rec
        loader = rec.loader
        instrumentation = self

        def __next__(it):
            if rec.tid != get_ident() and not rec.on_thread():
                return original(it)
            cpu0 = None
            try:
                rec.mark(DATA_IN)
                cpu0 = loader.wait_begins(it)
            except Exception as exc:
                rec.contain("DataLoader hook", exc)
            instrumentation.data_depth += 1
            batch = None
            try:
                batch = original(it)
                return batch
            finally:
                instrumentation.data_depth -= 1
                try:
                    rec.mark(DATA_OUT)
                    loader.wait_ends(cpu0, batch)
                except Exception as exc:
                    rec.contain("DataLoader hook", exc)

        return functools.update_wrapper(__next__, original)

    def _wrap_phase(self, phase: str, starts_step: bool = False):
        rec = self.rec
        compiling = self._is_compiling
        enter = PHASES.index(phase)
        leave = enter + EXIT

        def make(original):
            def wrapper(*args, **kwargs):
                if compiling() or (rec.tid != get_ident() and not rec.on_thread()):
                    return original(*args, **kwargs)
                try:
                    if starts_step and rec.step_boundary != "optimizer":
                        rec.backward_boundary()
                    rec.mark(enter)
                except Exception as exc:
                    rec.contain(f"{phase} hook", exc)
                try:
                    return original(*args, **kwargs)
                finally:
                    try:
                        rec.mark(leave)
                    except Exception as exc:
                        rec.contain(f"{phase} hook", exc)

            return functools.update_wrapper(wrapper, original)

        return make

    def _copy(self, original, tensor, args, kwargs):
        rec = self.rec
        if self._is_compiling() or not rec.on_thread():
            return original(tensor, *args, **kwargs)
        src_cpu = tensor.device.type == "cpu"
        t0 = perf_counter()
        out = original(tensor, *args, **kwargs)
        try:
            t1 = perf_counter()
            if out is not tensor:
                dst = out.device.type
                if src_cpu and dst != "cpu":
                    # logged after the fact: nothing else is logged during a copy (the log stays in order)
                    nbytes = tensor.element_size() * tensor.nelement()
                    rec.log(H2D_IN, t0)
                    rec.log(H2D_OUT, t1)
                    rec.log(H2D_BYTES, nbytes)
                    if not tensor.is_pinned():
                        rec.log(H2D_PAGEABLE_BYTES, nbytes)
                elif not src_cpu and dst == "cpu":
                    rec.log(SYNC, t1 - t0)
        except Exception as exc:
            rec.contain("copy hook", exc)
        return out

    def _wrap_copy(self, original):
        """Tensor.to / Tensor.cuda: time the host->device copies, pass everything else through."""
        copy = self._copy

        def copy_method(tensor, *args, **kwargs):
            return copy(original, tensor, args, kwargs)

        return functools.update_wrapper(copy_method, original)

    def _wrap_sync(self, original):
        rec = self.rec
        compiling = self._is_compiling

        timed = self._timed_sync

        def sync_method(tensor, *args, **kwargs):
            if compiling() or tensor.device.type == "cpu" or not rec.on_thread():
                return original(tensor, *args, **kwargs)
            return timed(original, (tensor, *args), kwargs)

        return functools.update_wrapper(sync_method, original)

    def _timed_sync(self, original, args, kwargs):
        """Run a host-blocking call and record how long the host waited (recording errors are contained)."""
        t0 = perf_counter()
        out = original(*args, **kwargs)
        try:
            self.rec.log(SYNC, perf_counter() - t0)
        except Exception as exc:
            self.rec.contain("sync hook", exc)
        return out

    def _wrap_sync_fn(self, original):
        rec = self.rec
        timed = self._timed_sync

        def synchronize(*args, **kwargs):
            if not rec.on_thread():
                return original(*args, **kwargs)
            return timed(original, args, kwargs)

        return functools.update_wrapper(synchronize, original)


def _is_compiled(module: Any) -> bool:
    """``torch.compile(model)`` (an ``OptimizedModule``) or ``model.compile()`` (compiled in place)."""
    return module is not None and (
        getattr(module, "_orig_mod", None) is not None
        or getattr(module, "_compiled_call_impl", None) is not None
    )


__all__ = ["Instrumentation"]
