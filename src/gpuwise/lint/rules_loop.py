"""Checks of how the training loop is set up: distributed data without a DistributedSampler, DataParallel,
``zero_grad(set_to_none=False)``, the model moved to the device every step, gradient clipping of
scaled gradients, ``len(list(loader))`` and conv nets without ``cudnn.benchmark``.

Each reads a file's `Context` (and its `Project`) like the checks in `rules`; importing this module
registers them in the same ``CHECKS`` list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gpuwise.lint.context import Context, keyword
from gpuwise.lint.project import always_deterministic
from gpuwise.lint.rules import Hit, _loaders, check
from gpuwise.lint.spans import Positions
from gpuwise.lint.types import Edit

__all__ = [
    "clip_before_unscale",
    "cudnn_benchmark_off",
    "data_parallel",
    "len_list_loader",
    "missing_distributed_sampler",
    "model_to_device_in_loop",
    "zero_grad_keeps_tensors",
]

_SAMPLERS = ("torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler")
_DDP = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")


@check
def missing_distributed_sampler(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """Plain DDP with a shuffled DataLoader that has no sampler: every rank trains on the same
    batches. Quiet when the project uses a DistributedSampler anywhere, or the dataset is split by
    rank (``rank``/``world_size`` in its construction, ``split_dataset_by_node``)."""
    if ctx.framework != "pytorch" or not ctx.uses_api(*_DDP):
        return
    if ctx.uses_api(*_SAMPLERS) or (ctx.project is not None and ctx.project.uses_distributed_sampler):
        return
    if ctx.names & {"split_dataset_by_node", "DistributedSampler", "shard"}:
        return
    for call in _loaders(ctx):
        if keyword(call, "sampler") or keyword(call, "batch_sampler") or len(call.args) > 3:
            continue
        shuffle = keyword(call, "shuffle")
        if shuffle is None or ctx.value(shuffle.value) is not True:
            continue  # an evaluation loader (or one decided elsewhere)
        mentioned = {w.lower() for node in call.args[:1] for w in _words(node)}
        if any("rank" in w or "world" in w for w in mentioned):
            continue
        yield Hit(
            "missing_distributed_sampler",
            call,
            "DataLoader(shuffle=True) under DDP without a DistributedSampler: every rank sees the same data",
        )


def _words(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr


@check
def data_parallel(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """torch.nn.DataParallel: one process drives every GPU, replicating the model and scattering the
    batch each step; DistributedDataParallel is faster even on one machine."""
    for call in ctx.calls_to("torch.nn.DataParallel", "torch.nn.parallel.DataParallel"):
        yield Hit("data_parallel", call, "nn.DataParallel replicates the model every step from one process")
    for call in ctx.calls_to("torch.nn.parallel.data_parallel"):  # the functional form, called per forward
        yield Hit("data_parallel", call, "nn.parallel.data_parallel replicates the model on every forward")


@check
def zero_grad_keeps_tensors(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """``zero_grad(set_to_none=False)``: a memset kernel per parameter every step, and the gradient
    memory stays allocated between steps."""
    for call in ctx.calls:
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "zero_grad"):
            continue
        kw = keyword(call, "set_to_none")
        value = kw.value if kw is not None else call.args[0] if call.args else None
        if value is not None and ctx.value(value) is False:
            yield Hit("zero_grad_keeps_tensors", call, "zero_grad(set_to_none=False) zeroes every gradient")


def _model_names(ctx: Context) -> set[str]:
    """Names whose ``.parameters()`` go to an optimizer, or that are ``.train()``-ed: the models."""
    names: set[str] = set()
    for call in ctx.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in {
            "parameters",
            "named_parameters",
            "train",
        }:
            continue
        if isinstance(func.value, ast.Name):
            names.add(func.value.id)
    return names


@check
def model_to_device_in_loop(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """``model.to(device)`` / ``model.cuda()`` every training step: a walk over every parameter and
    buffer per step (a no-op copy at best), usually a misplaced line."""
    if not ctx.step_loops:
        return
    models = _model_names(ctx)
    seen: set[ast.Call] = set()
    for code in ctx.step_code:
        node = code.node
        func = node.func
        if code.via or node in seen or not isinstance(func, ast.Attribute) or func.attr not in {"to", "cuda"}:
            continue
        if isinstance(func.value, ast.Name) and func.value.id in models and not keyword(node, "dtype"):
            seen.add(node)
            yield Hit(
                "model_to_device_in_loop",
                node,
                f"{func.value.id}.{func.attr}(...) every training step: move the model once, before the loop",
            )


@check
def clip_before_unscale(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """Gradient clipping with a GradScaler but no ``scaler.unscale_(optimizer)``: the norm is taken
    of scaled gradients (×65536 by default), so the clip threshold means nothing."""
    scaled = any(
        isinstance(c.func, ast.Attribute)
        and c.func.attr == "scale"
        and "scaler" in ctx.root_name(c.func).lower()
        for c in ctx.calls
    )
    if not scaled or "unscale_" in ctx.names:
        return
    for call in ctx.calls_to("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_"):
        yield Hit("clip_before_unscale", call, "gradients clipped while still scaled by the GradScaler")


@check
def len_list_loader(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """``len(list(loader))`` loads every batch of the epoch to count them; ``len(loader)`` is free
    for a map-style DataLoader (the edit is unsafe: an iterable dataset has no len)."""
    for call in ctx.calls_to("len"):
        inner = call.args[0] if len(call.args) == 1 else None
        if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "list"):
            continue
        target = inner.args[0] if len(inner.args) == 1 else None
        if isinstance(target, ast.Name) and _is_loader(ctx, target):
            edit = _replace(pos, inner, target.id)
            yield Hit(
                "len_list_loader", call, f"len(list({target.id})) loads the whole epoch to count it", edit
            )


def _is_loader(ctx: Context, name: ast.Name) -> bool:
    """A name called ``*loader*`` or assigned a DataLoader in this file."""
    if "loader" in name.id.lower():
        return True
    return any(
        ctx.parents.get(call) is not None and name.id in _targets(ctx.parents[call]) for call in _loaders(ctx)
    )


def _targets(node: ast.AST) -> set[str]:
    if not isinstance(node, ast.Assign):
        return set()
    return {t.id for t in node.targets if isinstance(t, ast.Name)}


def _replace(pos: Positions, node: ast.expr, text: str) -> Edit | None:
    if node.end_lineno is None or node.end_col_offset is None:
        return None
    start = pos.offset(node.lineno, node.col_offset)
    end = pos.offset(node.end_lineno, node.end_col_offset)
    return Edit(start, end, text, safe=False)


@check
def cudnn_benchmark_off(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """A convolutional network trained on the GPU without ``torch.backends.cudnn.benchmark = True``:
    cuDNN uses its default algorithm instead of timing the fastest one for each input shape."""
    project = ctx.project
    if ctx.framework != "pytorch" or not ctx.step_loops or not ctx.uses_gpu or project is None:
        return
    if not project.conv_net or project.sets_cudnn_benchmark:
        return
    if "deterministic" in ctx.names and always_deterministic(ctx):  # a reproducible run keeps it off
        return
    loop = ctx.step_loops[0]
    yield Hit("cudnn_benchmark_off", loop, "conv net trained without torch.backends.cudnn.benchmark = True")


# Deprecated torch APIs: (old dotted path, replacement shown in the message, exact rewrite of the call's
# head or "" when the replacement's behaviour differs). Deprecations as the PyTorch docs/warnings state:
# torch.cuda.amp.autocast/GradScaler (FutureWarning since 2.4), torch.testing.assert_allclose (since 1.12),
# torch.norm ("deprecated and may be removed"), torch.nn.utils.clip_grad_norm (since 0.4).
_DEPRECATED: dict[str, tuple[str, str]] = {
    "torch.cuda.amp.autocast": ('torch.amp.autocast("cuda", ...)', 'torch.amp.autocast("cuda"'),
    "torch.cuda.amp.GradScaler": ('torch.amp.GradScaler("cuda", ...)', 'torch.amp.GradScaler("cuda"'),
    "torch.testing.assert_allclose": ("torch.testing.assert_close", ""),
    "torch.norm": ("torch.linalg.vector_norm / matrix_norm", ""),
    "torch.nn.utils.clip_grad_norm": ("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm_("),
}


_DEPRECATED_LAST = frozenset(path.rpartition(".")[2] for path in _DEPRECATED)


@check
def deprecated_torch_api(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """A deprecated torch API: it warns on every call and is due to be removed. Fixable where the
    replacement is exact and the call is spelled out (``torch.cuda.amp.autocast(...)``)."""
    for old, (new, head) in _DEPRECATED.items():
        for call in ctx.calls_to(old):
            edit = _rewrite_head(pos, call, old, head) if head else None
            yield Hit("deprecated_torch_api", call, f"{old} is deprecated: use {new}", edit)
    for node, old in _deprecated_references(ctx):
        new = _DEPRECATED[old][0]
        yield Hit("deprecated_torch_api", node, f"{old} is deprecated (called through this name): use {new}")


def _deprecated_references(ctx: Context) -> Iterator[tuple[ast.expr, str]]:
    """A deprecated API kept in a name to be called later (``amp_autocast = torch.cuda.amp.autocast``,
    ``autocast_fn=torch.cuda.amp.autocast``): every call through the name warns. ``getattr(torch.cuda.amp,
    "autocast")`` (a feature test) names no attribute node and is not reported."""
    if not _DEPRECATED_LAST & ctx.names:  # no deprecated API named anywhere in the file
        return
    values: list[ast.expr] = [a.value for a in ctx.assigns]
    values += [k.value for c in ctx.calls for k in c.keywords]
    for value in values:
        for node in (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,):
            if isinstance(node, ast.Attribute) and ctx.qualname(node) in _DEPRECATED:
                yield node, ctx.qualname(node)


def _rewrite_head(pos: Positions, call: ast.Call, old: str, head: str) -> Edit | None:
    """Replace ``old(`` (spelled exactly so in the source) by ``head`` plus ``, `` before any argument."""
    start = pos.offset(call.lineno, call.col_offset)
    spelled = old + "("
    if not pos.text.startswith(spelled, start):
        return None
    more = ", " if not head.endswith("(") and (call.args or call.keywords) else ""
    return Edit(start, start + len(spelled), head + more)
