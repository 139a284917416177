"""The one-pass index of `Context.build` walks the same children as a field-by-field walk, so the
spelled-out child lists of the common node types (a speed-up) can never drop or reorder a node."""

from __future__ import annotations

import ast
from pathlib import Path

from gpuwise.lint.context import Context, subtree
from gpuwise.lint.walk import NOT_WALKED, children

REPO = Path(__file__).resolve().parents[2]
FILES = sorted((REPO / "tests" / "data" / "lint").glob("*.py")) + sorted(
    (REPO / "src" / "gpuwise" / "lint").glob("*.py")
)


def _field_children(node: ast.AST) -> list[ast.AST]:
    """The reference: every AST value of every walked field, in field order."""
    out: list[ast.AST] = []
    for name in node._fields:
        if name in NOT_WALKED:
            continue
        value = getattr(node, name, None)
        items = value if isinstance(value, list) else [value]
        out.extend(item for item in items if isinstance(item, ast.AST))
    return out


def test_children_match_a_field_by_field_walk() -> None:
    checked = 0
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            assert [id(c) for c in children(node)] == [id(c) for c in _field_children(node)], (path, node)
            checked += 1
    assert checked > 10_000


def test_index_and_subtree_cover_every_call() -> None:
    for path in FILES:
        tree = ast.parse(path.read_text())
        ctx = Context.build(tree, path.read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        assert {id(c) for c in ctx.calls} == {id(c) for c in calls}
        assert {id(n) for n in subtree(tree) if isinstance(n, ast.Call)} == {id(c) for c in calls}
        assert {id(n) for n in ctx.assigns} == {id(n) for n in ast.walk(tree) if isinstance(n, ast.Assign)}


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _walked_calls_and_loops(node: ast.AST) -> list[ast.AST]:
    """The reference for `Context.calls_and_loops`: a stack walk from ``node`` (children last
    first) keeping calls and loops, not entering nested function, lambda or class nodes below it."""
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Call | ast.For | ast.AsyncFor | ast.While):
            out.append(current)
        stack.extend(c for c in children(current) if not isinstance(c, _NESTED))
    return out


def test_calls_and_loops_match_a_walk_from_every_node() -> None:
    """The sliced index answers exactly what a walk from the node finds, in the same order, for
    every node of the files (statements, expressions, functions with nested ones, lambdas)."""
    checked = 0
    for path in FILES:
        text = path.read_text()
        tree = ast.parse(text)
        ctx = Context.build(tree, text)
        for node in ast.walk(tree):
            assert [id(n) for n in ctx.calls_and_loops(node)] == [
                id(n) for n in _walked_calls_and_loops(node)
            ], (path, getattr(node, "lineno", 0), type(node).__name__)
            checked += 1
    assert checked > 10_000


EVERY_SHAPE = """
import a.b as c
from .x import y
async def f(p, /, q: int = 1, *args, r, s=2, **kw) -> int:
    global g
    async for i in z:
        async with m() as n, o():
            yield i
    del d[0], e
    try:
        raise ValueError("x") from None
    except (KeyError, TypeError) as err:
        pass
    except:
        raise
    else:
        yield from w
    finally:
        assert p, "msg"
    v: int
    u: int = (t := 3)
    return {**kw, "k": 1}, {1, 2}, {k: v for k, v in kw.items() if k}, {x for x in q}
def h():
    nonlocal_user = lambda a, *b, c=1, **d: a
    x = [i async for i in j] if p else (i for i in k)
    s = f"{x!r:>{w}}" + s[1:2:3] + s[::]
    for _ in x:
        break
    else:
        continue
class K(B, metaclass=M):
    def g(self):
        def inner():
            nonlocal q
        return (yield)
"""


def test_spelled_out_children_cover_every_node_shape() -> None:
    """Rarer shapes than the corpus holds (async, positional-only and keyword-only parameters, bare
    except, ``**`` in a dict, starred slices, walrus, ...): still the field-by-field children."""
    tree = ast.parse(EVERY_SHAPE.replace("nonlocal q", "pass"))
    kinds = set()
    for node in ast.walk(tree):
        assert [id(c) for c in children(node)] == [id(c) for c in _field_children(node)], ast.dump(node)
        kinds.add(type(node).__name__)
    assert {"AsyncFor", "AsyncWith", "NamedExpr", "YieldFrom", "DictComp", "SetComp", "Set"} <= kinds
