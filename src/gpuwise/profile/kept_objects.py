"""Which tensors a training loop keeps across steps, who keeps them, and the line that does it.

A leak of a small tensor a step (nanoGPT-style ``loss_history.append(loss)``: the loss and its autograd
node, kept after the graph's buffers are freed) grows the heap by tens of KiB a step. To name it, the
live ``torch.Tensor`` objects are listed once when the measured window starts (their ids) and again when
it ends: tensors created in the window and still alive at its end that sit in one container (list, dict,
deque, set) are what the loop keeps. The container is named from where the training thread can reach
it (a global of a module, a local of a frame on its stack, an attribute of an object), and the lines of
the user's file that add to that name are read from the source. Each listing walks the collector's
objects once (tens of ms with torch loaded): it runs at the window's two ends, outside the steps.
"""

from __future__ import annotations

import gc
import linecache
import os
import re
import sys
import weakref
from collections import Counter, deque
from collections.abc import Iterable
from types import FrameType
from typing import Any

__all__ = ["KeptTensors"]

# Containers that keep this many of the window's new tensors per step of the window (0.5: one every
# other step) are reported; fewer is a cache or the last step's outputs.
KEPT_PER_STEP = 0.5
MAX_LINES = 3  # source lines named per container
_CONTAINERS = (list, dict, deque, set)


def _tensor_type() -> type | None:
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def _user_file(path: str) -> bool:
    """A file of the user's own code: not the standard library, an installed package, or gpuwise."""
    norm = path.replace(os.sep, "/")
    return (
        bool(path)
        and not path.startswith("<")
        and not any(
            part in norm for part in ("/site-packages/", "/dist-packages/", "/lib/python", "/gpuwise/")
        )
    )


def _describe(tensor: Any) -> dict[str, Any]:
    grad_fn = getattr(tensor, "grad_fn", None)
    return {
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).replace("torch.", ""),
        "requires_grad": bool(tensor.requires_grad),
        "grad_fn": type(grad_fn).__name__ if grad_fn is not None else None,
        "bytes": int(tensor.element_size() * tensor.nelement()),
    }


def _names(container: Any, frame: FrameType | None) -> list[tuple[str, str]]:
    """(name, file) pairs under which the training thread reaches ``container``: a local of a frame on
    its stack, a global of that frame's module, an attribute of an object (``obj.attr``)."""
    found: list[tuple[str, str]] = []
    while frame is not None:
        path = frame.f_code.co_filename
        if _user_file(path):
            for scope in (frame.f_locals, frame.f_globals):
                found += [(k, path) for k, v in scope.items() if v is container]
        frame = frame.f_back
    if not found:
        for ref in gc.get_referrers(container):
            if isinstance(ref, dict):
                attrs = [k for k, v in ref.items() if v is container]
                for owner in gc.get_referrers(ref):
                    if getattr(owner, "__dict__", None) is ref:
                        module = sys.modules.get(type(owner).__module__)
                        path = getattr(module, "__file__", "") or ""
                        found += [(f"{type(owner).__name__}.{a}", path) for a in attrs]
    return list(dict.fromkeys(found))


def _adding_lines(name: str, path: str) -> list[dict[str, Any]]:
    """Lines of ``path`` that add to ``name`` (``name.append(``, ``name +=``, ``name[...] =``)."""
    attr = name.split(".")[-1]
    target = rf"(?:\b{re.escape(name)}|\bself\.{re.escape(attr)})" if "." in name else rf"\b{re.escape(name)}"
    pattern = re.compile(
        r"\s*"
        + target
        + r"\s*(?:\.\s*(?:append|extend|insert|add|appendleft|update)\s*\(|\+=|\[[^\]]*\]\s*=)"
    )
    lines = []
    for number, text in enumerate(linecache.getlines(path), 1):
        if pattern.match(text):  # a statement that starts with the name (not a comment or a docstring)
            lines.append({"file": path, "line": number, "text": text.strip()})
    return lines[:MAX_LINES]


class KeptTensors:
    """Lists live tensors at the window's start (``mark``) and names what keeps the new ones at its end
    (``report``). Both run on the training thread at a step boundary."""

    def __init__(self) -> None:
        self._before: list[weakref.ref] | None = None
        self.marked = False  # mark() ran (once per window)

    def mark(self) -> None:
        """Note the ids of the tensors alive now (the window starts)."""
        self.marked = True
        tensor = _tensor_type()
        if tensor is None:
            return
        # weak references: an id alone could be reused by a new tensor once the old one is freed
        self._before = [weakref.ref(o) for o in gc.get_objects() if issubclass(type(o), tensor)]

    def report(self, steps: int, frame: FrameType | None) -> list[dict[str, Any]]:
        """Containers that gained at least ``KEPT_PER_STEP`` of the window's new tensors per step, each with
        its name(s), the tensors' description and the user's lines that add to it; [] when none."""
        tensor = _tensor_type()
        if tensor is None or self._before is None or steps < 1:
            return []
        before = {id(o) for ref in self._before if (o := ref()) is not None}
        self._before = None
        new = [o for o in gc.get_objects() if issubclass(type(o), tensor) and id(o) not in before]
        if not new:
            return []
        holders, by_id, sample = _holders(new)
        out = []
        for key, count in holders.most_common(3):
            if count < KEPT_PER_STEP * steps:
                break
            names = _names(by_id[key], frame)
            lines = [line for name, path in names if _user_file(path) for line in _adding_lines(name, path)]
            out.append(
                {
                    "container": type(by_id[key]).__name__,
                    "names": [name for name, _ in names],
                    "new_tensors": count,
                    "length": len(by_id[key]),
                    # a deque(maxlen=N) stops growing at N: a window, not a leak
                    "maxlen": getattr(by_id[key], "maxlen", None),
                    "tensor": _describe(sample[key]),
                    "lines": lines[:MAX_LINES],
                }
            )
        return out


def _holders(new: list[Any]) -> tuple[Counter[int], dict[int, Any], dict[int, Any]]:
    """Containers holding tensors of ``new``: (id -> how many, id -> container, id -> one of them)."""
    holders: Counter[int] = Counter()
    by_id: dict[int, Any] = {}
    sample: dict[int, Any] = {}
    new_ids = {id(t) for t in new}
    own = {id(new)}  # the caller's own list is no container of the loop's
    for ref in gc.get_referrers(*new):
        if isinstance(ref, _CONTAINERS) and id(ref) not in own:
            kept = [x for x in _values(ref) if id(x) in new_ids]
            if kept:
                holders[id(ref)] += len(kept)
                by_id[id(ref)] = ref
                sample[id(ref)] = kept[-1]
    return holders, by_id, sample


def _values(container: Any) -> Iterable[Any]:
    return container.values() if isinstance(container, dict) else container
