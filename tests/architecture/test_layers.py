"""The house rules of src/gpuwise, checked on the code itself (ARCHITECTURE.md, "Layers").

Why a test: the package graph decayed into two import cycles while every other gate stayed green. The
layer table below is the one ARCHITECTURE.md shows; this test keeps both true. It reads the source as
text (ast), so it needs nothing installed and runs in well under a second.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import pytest
from radon.complexity import cc_visit_ast  # the dev extra: the same tool the figures came from

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuwise"

# Lowest first. A package may import only packages of a LOWER layer; packages of one layer are
# independent of each other. `python -m gpuwise` (__main__) and the root package sit above all.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "units", "_version"),
    ("vision",),
    ("catalog",),
    ("workload",),
    ("diagnose",),
    ("store",),
    ("memory",),
    ("perf",),
    ("serving", "simulation"),
    ("lint", "trace", "monitor", "loadtest"),
    ("finops", "exporter", "profile"),
    ("bench", "tune"),
    ("doctor", "plan"),
    ("report",),
    ("tui",),
    ("cli",),
)
RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}
TOP = len(LAYERS)  # __main__ and the root __init__

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
MAX_COMPLEX_BLOCKS = 10  # radon grade D or worse (cyclomatic complexity > 20)


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text())


def _tree(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per version of the file: the rules below all read the same
    trees (parsing src/gpuwise is ~1.5 s of CPU a pass, and the extending guide runs this file 6 times)."""
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _imports_of(path: Path, mtime_ns: int, size: int) -> tuple[tuple[str, int], ...]:
    return tuple(_imported_modules(path, _tree(path)))


def _module_name(path: Path) -> tuple[str, ...]:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _package_of(path: Path) -> str:
    """The top-level unit a file belongs to: a subpackage, a top-level module, or the root."""
    rel = path.relative_to(SRC).parts
    if len(rel) == 1:
        return "__root__" if rel[0] == "__init__.py" else Path(rel[0]).stem
    return rel[0]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks: imports for annotations only."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    return skipped


def _imported_modules(path: Path, tree: ast.AST) -> list[tuple[str, int]]:
    """(absolute module name, line) for every import in the file, functions included."""
    here = _module_name(path)
    is_package = path.name == "__init__.py"
    skipped = _type_checking_nodes(tree)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here if is_package else here[:-1])
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            if module == "gpuwise":  # `from gpuwise import x`: x is the unit imported
                found.extend((f"gpuwise.{alias.name}", node.lineno) for alias in node.names)
            else:
                found.append((module, node.lineno))
    return found


def package_edges() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> ["module:line", ...] over every file of src/gpuwise."""
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(SRC.rglob("*.py")):
        source = _package_of(path)
        stat = path.stat()
        for module, line in _imports_of(path, stat.st_mtime_ns, stat.st_size):
            parts = module.split(".")
            if parts[0] != "gpuwise" or len(parts) < 2:
                continue
            target = "__root__" if parts[1] == "__version__" else parts[1]
            if target != source:
                edges[source][target].append(f"{path.relative_to(SRC)}:{line}")
    return edges


def _rank(package: str) -> int | None:
    if package in ("__main__", "__root__"):
        return TOP
    return RANK.get(package)


def test_every_package_has_a_layer() -> None:
    packages = {_package_of(path) for path in SRC.rglob("*.py")} - {"__main__", "__root__"}
    assert sorted(packages - set(RANK)) == [], "add the new package to LAYERS and ARCHITECTURE.md"


def test_imports_point_down() -> None:
    problems = []
    for source, targets in package_edges().items():
        for target, where in targets.items():
            low, high = _rank(target), _rank(source)
            if low is None or high is None or low >= high:
                problems.append(f"{source} -> {target} ({', '.join(where[:3])})")
    assert problems == [], "imports that do not point to a lower layer:\n" + "\n".join(problems)


def test_no_cycles() -> None:
    edges = package_edges()
    graph = {source: set(targets) for source, targets in edges.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    cycles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and reaches(b, a))
    assert cycles == []


def _python_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_module_length(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES


def _is_typer_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Typer commands declare their options in the signature: those lines do not count."""
    return any("typer" in ast.unparse(arg.annotation or ast.Constant(None)) for arg in node.args.args) or any(
        "typer.Option" in ast.unparse(default) or "typer.Argument" in ast.unparse(default)
        for default in node.args.defaults
    )


def long_functions() -> list[str]:
    """Functions whose body (for Typer commands) or whole definition exceeds MAX_FUNCTION_LINES."""
    found = []
    for path in _python_files():
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            start = node.body[0].lineno if _is_typer_command(node) else node.lineno
            length = (node.end_lineno or node.lineno) - start + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_function_length() -> None:
    assert long_functions() == []


def test_complexity_budget() -> None:
    blocks = []
    for path in _python_files():
        for block in cc_visit_ast(_tree(path)):
            if block.complexity > 20:
                blocks.append(f"{path.relative_to(SRC)}:{block.lineno} {block.name} {block.complexity}")
    assert len(blocks) <= MAX_COMPLEX_BLOCKS, "\n".join(blocks)


def _public_modules() -> list[Path]:
    """Modules a user or another package imports: not `_private.py`, not inside a `_private/` package."""
    return [
        p
        for p in _python_files()
        if (not p.name.startswith("_") or p.name == "__init__.py")
        and not any(part.startswith("_") for part in p.relative_to(SRC).parts[:-1])
    ]


def test_public_modules_declare_all() -> None:
    """`__all__` says what a module offers, so a reader (and `import *`) sees the API at a glance."""
    missing = []
    for path in _public_modules():
        tree = _tree(path)
        names = {
            t.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        names |= {
            node.target.id
            for node in tree.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        }
        only_docstring = all(isinstance(node, ast.Expr) for node in tree.body)
        if "__all__" not in names and not (path.name == "__init__.py" and only_docstring):
            missing.append(str(path.relative_to(SRC)))
    assert missing == []


def docstring_coverage() -> dict[str, tuple[int, int]]:
    """package -> (documented, public) over modules, public classes, functions and methods."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    def count(package: str, node: ast.AST) -> None:
        counts[package][1] += 1
        counts[package][0] += ast.get_docstring(node) is not None  # type: ignore[arg-type]

    for path in _public_modules():
        package = _package_of(path)
        tree = _tree(path)
        count(package, tree)
        for node in tree.body:
            if isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
            ) and not node.name.startswith("_"):
                count(package, node)
                if isinstance(node, ast.ClassDef):
                    for member in node.body:
                        if isinstance(
                            member, ast.FunctionDef | ast.AsyncFunctionDef
                        ) and not member.name.startswith("_"):
                            count(package, member)
    return {package: (done, total) for package, (done, total) in counts.items()}


def test_public_docstrings() -> None:
    low = {p: f"{d}/{t}" for p, (d, t) in docstring_coverage().items() if d < 0.8 * t}
    assert low == {}, "packages under 80 % public docstrings"
