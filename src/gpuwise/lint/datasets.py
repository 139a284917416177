"""What a DataLoader's dataset does per item, read from the code: the loader rules grade by it.

Workers and pinned memory pay off when each item costs CPU time (reading files, decoding images or
audio, augmenting, tokenizing); for tensors already in memory, or rows a HF ``datasets`` ``.map()``
has tokenized ahead of time, the main-process collate takes milliseconds and the finding is noise.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Literal

from gpuwise.lint.context import Context, keyword

__all__ = ["DataCost", "dataset_cost", "small_items"]

# heavy: per-item IO/decode/augment; unknown: cannot tell from here; tokenized: pre-processed rows;
# memory: tensors or synthetic data already in memory.
DataCost = Literal["heavy", "unknown", "tokenized", "memory"]

_HEAVY_CALL = re.compile(
    r"open|imread|read|load|decode|transform|augment|crop|resize|flip|jitter|tokeniz|encode|"
    r"memmap|fromfile|urlopen|request|fetch|download|sleep|audio|video|image",
    re.IGNORECASE,
)
_HEAVY_CLASS = re.compile(r"image|folder|video|audio|speech|coco|voc|kinetics|webdataset|wds", re.IGNORECASE)
_VISION = ("torchvision.datasets.", "torchaudio.datasets.")
_VISION_ROOTS = ("torchvision", "torchaudio")  # what a name under _VISION resolves its root to
_IN_MEMORY_CLASS = re.compile(r"synthetic|random|dummy|fake|toy", re.IGNORECASE)
_FACTORIES = frozenset({"randn", "rand", "randint", "zeros", "ones", "arange", "tensor", "full", "empty"})
_TOKENIZED = frozenset({"map", "with_format", "set_format", "load_from_disk", "load_dataset", "tokenize"})
_PASS_THROUGH = frozenset(
    {"filter", "select", "shuffle", "train_test_split", "remove_columns", "rename_column"}
)
_HEAVY_METHODS = frozenset({"with_transform", "set_transform"})
_RANK = {"heavy": 0, "unknown": 1, "tokenized": 2, "memory": 3}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)  # a tuple: isinstance on a hot path


def dataset_cost(ctx: Context, loader: ast.Call) -> DataCost:
    """How much CPU work the loader's dataset does per item (see the module docstring)."""
    given = keyword(loader, "dataset")
    expr = given.value if given is not None else loader.args[0] if loader.args else None
    if expr is None:
        return "unknown"
    costs: dict[ast.Call, DataCost] = ctx.memo.setdefault("dataset_costs", {})  # type: ignore[assignment]
    if loader not in costs:
        costs[loader] = _cost(ctx, expr, loader, 0)
    return costs[loader]


# Datasets of thumbnail images (28x28 to 32x32): a batch is 0.2-1.5 MB, its pageable copy takes
# tens of microseconds, so pinning saves nothing measurable (the per-item transform still costs CPU).
_SMALL_ITEMS = frozenset(
    {"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN"}
)


def small_items(ctx: Context, loader: ast.Call) -> bool:
    """Is the loader's dataset one of the thumbnail-image datasets (MNIST, CIFAR, SVHN)?"""
    given = keyword(loader, "dataset")
    expr = given.value if given is not None else loader.args[0] if loader.args else None
    at: ast.AST = loader
    for _ in range(4):
        if isinstance(expr, ast.Name | ast.Attribute) and not isinstance(expr, ast.Call):
            value = _assigned(ctx, expr, at)  # read where it was assigned: self.x = ds in __init__
            if value is None:
                return False
            expr = at = value
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        else:
            break
    if not isinstance(expr, ast.Call):
        return False
    name = ctx.qualname(expr.func)
    return (name.rpartition(".")[2] if name else getattr(expr.func, "attr", "")) in _SMALL_ITEMS


def _cost(ctx: Context, expr: ast.expr, at: ast.AST, depth: int) -> DataCost:
    if depth > 6:
        return "unknown"
    if isinstance(expr, ast.List | ast.ListComp | ast.Tuple | ast.Dict):
        return "memory"
    if isinstance(expr, ast.Subscript):
        return _cost(ctx, expr.value, at, depth + 1)
    if isinstance(expr, ast.Name | ast.Attribute) and not isinstance(expr, ast.Call):
        value = _assigned(ctx, expr, at)
        if value is None:
            return _built_here(ctx, depth) if _is_parameter(ctx, expr, at) else "unknown"
        return _cost(ctx, value, value, depth + 1)
    if isinstance(expr, ast.Call):
        return _call_cost(ctx, expr, depth)
    return "unknown"


def _call_cost(ctx: Context, call: ast.Call, depth: int) -> DataCost:
    name = ctx.qualname(call.func)
    last = name.rpartition(".")[2] if name else getattr(call.func, "attr", "")
    if isinstance(call.func, ast.Attribute) and last in _HEAVY_METHODS | _TOKENIZED | _PASS_THROUGH:
        return _method_cost(ctx, call.func, last, call, depth)
    if last in {"load_dataset", "load_from_disk"}:
        return "tokenized"
    if last == "TensorDataset" or (name.startswith("torch.") and last in _FACTORIES):
        return "memory"
    if last in {"Subset", "ConcatDataset"} and call.args and not isinstance(call.args[0], ast.Starred):
        return _cost(ctx, call.args[0], call, depth + 1)
    if name.startswith(_VISION) or _HEAVY_CLASS.search(last):
        return "heavy"
    return _defined_cost(ctx, last)


def _is_parameter(ctx: Context, expr: ast.expr, at: ast.AST) -> bool:
    """Is ``expr`` a parameter of the function around ``at`` (``def make_loader(dataset, ...)``)?"""
    scope = _scope(ctx, at)
    if not isinstance(expr, ast.Name) or not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    arguments = scope.args
    return expr.id in {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}


def _built_here(ctx: Context, depth: int) -> DataCost:
    """A loader built from a function parameter gets one of the datasets this file constructs (project
    Dataset classes, TensorDataset, torchvision datasets): their common cost when they agree, else
    unknown. ``prepare_dataloader(dataset, ...)`` fed ``MyTrainDataset(2048)`` is in-memory."""
    found = ctx.memo.get("built_datasets")
    if found is None:
        project = ctx.project
        known = project.item_classes if project is not None else set()
        costs: set[DataCost] = set()
        for call in ctx.calls:
            if _may_build(ctx, call.func, known):
                costs.add(_call_cost(ctx, call, depth + 1))
        found = costs.pop() if len(costs) == 1 else "unknown"
        ctx.memo["built_datasets"] = found
    return found  # type: ignore[return-value]  # memo holds what this function built


def _may_build(ctx: Context, func: ast.expr, known: set[str]) -> bool:
    """Does the call construct a dataset `_built_here` counts: its name's last part (``qualname``'s,
    else the attribute) is a known item class or TensorDataset, or its name is under ``_VISION``?
    The dotted name is resolved only when its root module could lead there."""
    root: Any = func
    while type(root) is ast.Attribute:
        root = root.value
    if type(root) is not ast.Name:
        last = getattr(func, "attr", "")  # no dotted name: `qualname` is ''
        return last in known or last == "TensorDataset"
    module = ctx.aliases.get(root.id, root.id)
    last = func.attr if root is not func else module.rpartition(".")[2]  # type: ignore[attr-defined]
    if last in known or last == "TensorDataset":
        return True
    return module.startswith(_VISION_ROOTS) and ctx.qualname(func).startswith(_VISION)


def _method_cost(ctx: Context, func: ast.Attribute, last: str, call: ast.Call, depth: int) -> DataCost:
    """``ds.with_transform(f)`` is heavy; ``ds.map(f)`` tokenizes ahead; ``ds.shuffle()`` keeps ds's cost."""
    if last in _HEAVY_METHODS:
        return "heavy"
    inner = _cost(ctx, func.value, call, depth + 1)
    if last in _PASS_THROUGH:
        return inner
    return inner if inner in {"heavy", "memory"} else "tokenized"


def _defined_cost(ctx: Context, last: str) -> DataCost:
    """A Dataset class of the project, judged by its ``__getitem__``; a synthetic-sounding name."""
    project = ctx.project
    cls = project.datasets.get(last) if project is not None else None
    if cls is not None:
        return _class_cost(cls)
    return "memory" if _IN_MEMORY_CLASS.search(last) else "unknown"


def _class_cost(cls: ast.ClassDef) -> DataCost:
    """A Dataset class by its ``__getitem__``/``__iter__``: heavy calls, or indexing only."""
    if _IN_MEMORY_CLASS.search(cls.name):
        return "memory"
    methods = [
        f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name in {"__getitem__", "__iter__"}
    ]
    if not methods:
        return "unknown"
    verdict: DataCost = "memory"
    for method in methods:
        for node in ast.walk(method):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if _HEAVY_CALL.search(called):
                return "heavy"
            if called in _FACTORIES or called in {"from_numpy", "as_tensor", "long", "float", "int", "len"}:
                continue
            verdict = "unknown" if _RANK[verdict] > _RANK["unknown"] else verdict
    return verdict


def _assignments(ctx: Context) -> dict[str, list[tuple[int, ast.AST | None, ast.expr]]]:
    """Every ``target = value`` of the file once: target text -> (line, enclosing function or None
    for module level, value); tuple unpacking is paired item by item."""
    found = ctx.memo.get("assignments")
    if found is not None:
        return found  # type: ignore[return-value]  # memo holds what this function built
    index: dict[str, list[tuple[int, ast.AST | None, ast.expr]]] = {}
    for node in ctx.assigns:
        scope = _scope(ctx, node)
        for target in node.targets:
            for name, value in _pairs(target, node.value):
                index.setdefault(name, []).append((node.lineno, scope, value))
    ctx.memo["assignments"] = index
    return index


def _scope(ctx: Context, node: ast.AST) -> ast.AST | None:
    parent = ctx.parents.get(node)
    while parent is not None and not isinstance(parent, _FUNCTIONS):
        parent = ctx.parents.get(parent)
    return parent


def _assigned(ctx: Context, target: ast.Name | ast.Attribute, at: ast.AST) -> ast.expr | None:
    """The value last assigned to ``target`` (a local name in the enclosing function or module, or a
    ``self.x`` attribute anywhere in the file) before ``at``; None when unknown."""
    if isinstance(target, ast.Name):
        wanted = target.id
    elif isinstance(target.value, ast.Name):
        wanted = f"{target.value.id}.{target.attr}"
    else:
        return None
    line = getattr(at, "lineno", 10**9)
    scope = _scope(ctx, at) if isinstance(target, ast.Name) else None
    best: tuple[int, ast.expr] | None = None
    for lineno, where, value in _assignments(ctx).get(wanted, ()):
        if lineno > line or (isinstance(target, ast.Name) and where is not scope) or _inside(at, value):
            continue
        if best is None or lineno >= best[0]:
            best = (lineno, value)
    return best[1] if best else None


def _inside(node: ast.AST, value: ast.expr) -> bool:
    """Is ``node`` part of ``value``? ``ds = ds.rename_column(...)`` reads the earlier ``ds``, not itself."""
    line = getattr(node, "lineno", -1)
    end = value.end_lineno if value.end_lineno is not None else value.lineno
    return value.lineno <= line <= end and any(sub is node for sub in ast.walk(value))


def _pairs(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    """(target text, value) for ``x = v``, ``self.x = v`` and ``a, b = u, v``."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return [(f"{target.value.id}.{target.attr}", value)]
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        return [pair for t, v in zip(target.elts, value.elts, strict=True) for pair in _pairs(t, v)]
    if isinstance(target, ast.Tuple) and _splits(value):  # train, val = random_split(ds, [...]): items of ds
        assert isinstance(value, ast.Call)  # _splits checked it
        return [pair for t in target.elts for pair in _pairs(t, value.args[0])]
    return []


def _splits(value: ast.expr) -> bool:
    """``random_split(ds, ...)``: every part it returns holds items of ``ds``."""
    if not isinstance(value, ast.Call) or not value.args or isinstance(value.args[0], ast.Starred):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name == "random_split"
