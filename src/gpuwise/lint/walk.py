"""Child lists of syntax-tree nodes for the linter's walks: ``ast.iter_child_nodes`` without the fields
that hold no code (Load/Store markers, operators, names), spelled out per node type where that is
common, because the index of `gpuwise.lint.context` walks every node of every file."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

__all__ = ["FAST_CHILDREN", "NOT_WALKED", "children"]

_FIELDS: dict[type, tuple[str, ...]] = {}


# Fields never walked: Load/Store markers and operators (a third of all nodes; rules read ``.op``
# directly), import aliases (read by the Import branch of ``build``), and fields that hold plain text
# or numbers.
NOT_WALKED = frozenset(
    {"ctx", "op", "ops", "names", "type_ignores", "id", "attr", "arg", "name", "asname", "module", "level"}
    | {"type_comment", "kind", "is_async", "conversion"}
)


def children(node: ast.AST) -> list[ast.AST]:
    """ast.iter_child_nodes without the fields in ``NOT_WALKED``, in field order."""
    kind = type(node)
    fast = FAST_CHILDREN.get(kind)
    if fast is not None:
        return fast(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(f for f in kind._fields if f not in NOT_WALKED)
    out: list[ast.AST] = []
    for name in names:
        value = getattr(node, name, None)
        if type(value) is list:
            for item in value:
                if isinstance(item, ast.AST):
                    out.append(item)
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


# The commonest node types, spelled out (same children, same order as the generic loop in
# ``children``): parsed trees hold only nodes in these fields, and skipping the per-field getattr and
# type tests halves the cost of indexing a file.
FAST_CHILDREN: dict[type, Callable[[Any], list[ast.AST]]] = {
    ast.Attribute: lambda n: [n.value],
    ast.Call: lambda n: [n.func, *n.args, *n.keywords],
    ast.keyword: lambda n: [n.value],
    ast.Expr: lambda n: [n.value],
    ast.Assign: lambda n: [*n.targets, n.value],
    ast.BinOp: lambda n: [n.left, n.right],
    ast.Subscript: lambda n: [n.value, n.slice],
    ast.Compare: lambda n: [n.left, *n.comparators],
    ast.Tuple: lambda n: list(n.elts),
    ast.List: lambda n: list(n.elts),
    ast.UnaryOp: lambda n: [n.operand],
    ast.BoolOp: lambda n: list(n.values),
    ast.Starred: lambda n: [n.value],
    ast.Await: lambda n: [n.value],
    ast.AugAssign: lambda n: [n.target, n.value],
    ast.Return: lambda n: [] if n.value is None else [n.value],
    ast.If: lambda n: [n.test, *n.body, *n.orelse],
    ast.While: lambda n: [n.test, *n.body, *n.orelse],
    ast.For: lambda n: [n.target, n.iter, *n.body, *n.orelse],
    ast.withitem: lambda n: (
        [n.context_expr] if n.optional_vars is None else [n.context_expr, n.optional_vars]
    ),
    ast.JoinedStr: lambda n: list(n.values),
}


def _present(*values: Any) -> list[ast.AST]:
    """The values that are nodes (optional fields hold None when absent)."""
    return [v for v in values if v is not None]


# Less common types, spelled out only where the running Python lays their fields out as below (3.12
# adds ``type_params`` to definitions): elsewhere the generic loop of ``children`` walks them.
_MORE_CHILDREN: dict[type, tuple[tuple[str, ...], Callable[[Any], list[ast.AST]]]] = {
    ast.arg: (
        ("arg", "annotation", "type_comment"),
        lambda n: [] if n.annotation is None else [n.annotation],
    ),
    ast.arguments: (
        ("posonlyargs", "args", "vararg", "kwonlyargs", "kw_defaults", "kwarg", "defaults"),
        lambda n: (
            [*n.args, *n.defaults]  # the common case: no /, *args, keyword-only or **kwargs
            if not (n.posonlyargs or n.vararg or n.kwonlyargs or n.kwarg)
            else [
                *n.posonlyargs,
                *n.args,
                *_present(n.vararg),
                *n.kwonlyargs,
                *_present(*n.kw_defaults),
                *_present(n.kwarg),
                *n.defaults,
            ]
        ),
    ),
    ast.FunctionDef: (
        ("name", "args", "body", "decorator_list", "returns", "type_comment"),
        lambda n: [n.args, *n.body, *n.decorator_list, *_present(n.returns)],
    ),
    ast.AsyncFunctionDef: (
        ("name", "args", "body", "decorator_list", "returns", "type_comment"),
        lambda n: [n.args, *n.body, *n.decorator_list, *_present(n.returns)],
    ),
    ast.ClassDef: (
        ("name", "bases", "keywords", "body", "decorator_list"),
        lambda n: [*n.bases, *n.keywords, *n.body, *n.decorator_list],
    ),
    ast.Import: (("names",), lambda n: []),
    ast.ImportFrom: (("module", "names", "level"), lambda n: []),
    ast.With: (("items", "body", "type_comment"), lambda n: [*n.items, *n.body]),
    ast.AsyncWith: (("items", "body", "type_comment"), lambda n: [*n.items, *n.body]),
    ast.AsyncFor: (
        ("target", "iter", "body", "orelse", "type_comment"),
        lambda n: [n.target, n.iter, *n.body, *n.orelse],
    ),
    ast.FormattedValue: (
        ("value", "conversion", "format_spec"),
        lambda n: [n.value] if n.format_spec is None else [n.value, n.format_spec],
    ),
    ast.Dict: (("keys", "values"), lambda n: [*_present(*n.keys), *n.values]),
    ast.Set: (("elts",), lambda n: list(n.elts)),
    ast.Slice: (("lower", "upper", "step"), lambda n: _present(n.lower, n.upper, n.step)),
    ast.comprehension: (("target", "iter", "ifs", "is_async"), lambda n: [n.target, n.iter, *n.ifs]),
    ast.ListComp: (("elt", "generators"), lambda n: [n.elt, *n.generators]),
    ast.SetComp: (("elt", "generators"), lambda n: [n.elt, *n.generators]),
    ast.GeneratorExp: (("elt", "generators"), lambda n: [n.elt, *n.generators]),
    ast.DictComp: (("key", "value", "generators"), lambda n: [n.key, n.value, *n.generators]),
    ast.IfExp: (("test", "body", "orelse"), lambda n: [n.test, n.body, n.orelse]),
    ast.Lambda: (("args", "body"), lambda n: [n.args, n.body]),
    ast.Module: (("body", "type_ignores"), lambda n: list(n.body)),
    ast.Try: (
        ("body", "handlers", "orelse", "finalbody"),
        lambda n: [*n.body, *n.handlers, *n.orelse, *n.finalbody],
    ),
    ast.ExceptHandler: (("type", "name", "body"), lambda n: [*_present(n.type), *n.body]),
    ast.Raise: (("exc", "cause"), lambda n: _present(n.exc, n.cause)),
    ast.Assert: (("test", "msg"), lambda n: [n.test] if n.msg is None else [n.test, n.msg]),
    ast.AnnAssign: (
        ("target", "annotation", "value", "simple"),
        lambda n: [n.target, n.annotation, *_present(n.value)],
    ),
    ast.Delete: (("targets",), lambda n: list(n.targets)),
    ast.NamedExpr: (("target", "value"), lambda n: [n.target, n.value]),
    ast.Yield: (("value",), lambda n: _present(n.value)),
    ast.YieldFrom: (("value",), lambda n: [n.value]),
    ast.Pass: ((), lambda n: []),
    ast.Break: ((), lambda n: []),
    ast.Continue: ((), lambda n: []),
    ast.Global: (("names",), lambda n: []),
    ast.Nonlocal: (("names",), lambda n: []),
}
FAST_CHILDREN.update(
    {kind: walk for kind, (fields, walk) in _MORE_CHILDREN.items() if getattr(kind, "_fields", ()) == fields}
)
