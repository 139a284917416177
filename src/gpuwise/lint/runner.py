"""Lint files: discover, read, parse, run every enabled check, drop suppressed hits, sort."""

from __future__ import annotations

import ast
import gc
import os
import warnings
from pathlib import Path

from gpuwise.lint import rules_loop  # noqa: F401  (registers its checks in CHECKS)
from gpuwise.lint.catalog import SPECS
from gpuwise.lint.config import LintConfig
from gpuwise.lint.context import Context
from gpuwise.lint.project import Project, declares, folder_root
from gpuwise.lint.rules import CHECKS
from gpuwise.lint.source import Source, discover, read_source
from gpuwise.lint.spans import Positions
from gpuwise.lint.suppress import Suppressions
from gpuwise.lint.types import LintResult, Note, Violation

__all__ = ["lint_paths", "lint_source", "parse"]


def parse(source: Source) -> ast.Module | Note:
    """The file's syntax tree, or a Note saying why it cannot be linted."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes etc. are not ours to report
        return _parse(source)


def _parse(source: Source) -> ast.Module | Note:
    """`parse` for callers that already ignore SyntaxWarning (`lint_paths`, for the whole run)."""
    try:
        return ast.parse(source.text, filename=source.path)
    except SyntaxError as err:
        cell, line = source.place(err.lineno or 0)
        where = f"cell {cell}, line {line}" if cell else f"line {line}"
        return Note(source.path, f"syntax error at {where}: {err.msg}; not linted")
    except (ValueError, RecursionError) as err:  # null bytes; absurdly deep nesting
        return Note(source.path, f"cannot parse: {err}; not linted")


def lint_source(
    source: Source, config: LintConfig | None = None, ctx: Context | None = None
) -> list[Violation] | Note:
    """Violations in one file's text, most severe first; a Note if it does not parse. ``ctx``: the
    file already parsed and joined to its project (`lint_paths`); else the file is its own project."""
    config = config or LintConfig()
    if ctx is None:
        tree = parse(source)
        if isinstance(tree, Note):
            return tree
        ctx = Context.build(tree, source.text, config.assume_gpu)
        ctx.project = Project.of([ctx], None)
    enabled = config.enabled(source.path)
    pos = Positions(source.text)
    suppressed = Suppressions.parse(source.text)
    found: dict[tuple[str, int, int], Violation] = {}
    for check in CHECKS:
        for hit in check(ctx, pos):
            if hit.rule not in enabled:
                continue
            spec = SPECS[hit.rule]
            line = getattr(hit.node, "lineno", 1)
            end = getattr(hit.node, "end_lineno", None) or line
            if (suppressed.lines or suppressed.whole_file) and (  # most files carry no ignore comment
                suppressed.hides(range(line, line + 1), {spec.id, spec.finding})
                or suppressed.hides(range(end, end + 1), {spec.id, spec.finding})
            ):
                continue
            col = pos.column(line, getattr(hit.node, "col_offset", 0)) + 1
            cell, cell_line = source.place(line)
            violation = Violation(
                rule=spec.id,
                path=source.path,
                line=cell_line,
                col=col,
                message=hit.message,
                severity=config.severity.get(spec.id, hit.severity or spec.severity),
                cell=cell,
                edit=hit.edit if spec.fixable and not source.is_notebook else None,
                code=pos.lines[line - 1].strip() if line <= len(pos.lines) else "",
                framework=ctx.framework,
                file_line=source.file_line(line),
            )
            found.setdefault((spec.id, line, col), violation)
    return sorted(found.values(), key=lambda v: (v.cell or 0, v.line, v.col, v.rule))


def _stop(real: Path, tops: list[Path]) -> Path:
    """The path argument a discovered file (``real``: resolved) came from, given the resolved
    directory arguments ``tops``: projects are looked for inside it only."""
    text = str(real)
    for top in tops:
        if text.startswith(str(top).rstrip(os.sep) + os.sep):  # top in real.parents
            return top
    return real.parent


def _projects(paths: list[Path], found: list[Path], real: dict[Path, str]) -> dict[Path, list[Path]]:
    """The discovered files grouped by project root (`project_root`), in discovery order. Each
    path argument is resolved once, each file's resolved path comes from discovery (``real``) and
    each folder's root is looked up once."""
    tops = [top for top in (root.resolve() for root in paths) if top.is_dir()]
    roots: dict[tuple[Path, Path], Path] = {}
    groups: dict[Path, list[Path]] = {}
    for path in found:
        resolved = Path(real[path])
        stop = _stop(resolved, tops)
        key = (resolved.parent, stop)
        root = roots.get(key)
        if root is None:
            root = roots[key] = folder_root(resolved.parent, stop)
        groups.setdefault(root, []).append(path)
    return groups


def lint_paths(paths: list[Path], config: LintConfig | None = None) -> LintResult:
    """Lint files, directories and notebooks (see `_lint_paths`). The cyclic garbage collector is
    paused for the run: syntax trees hold no reference cycles, so reference counting frees each
    project's trees, and the collector's scans of them cost about a fifth of the lint time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings():  # once for the run, not per file (see `parse`)
            warnings.simplefilter("ignore", SyntaxWarning)
            return _lint_paths(paths, config)
    finally:
        if enabled:
            gc.enable()


def _lint_paths(paths: list[Path], config: LintConfig | None = None) -> LintResult:
    """Lint files, directories and notebooks; a file that cannot be linted becomes a note. Files
    are grouped into projects (`gpuwise.lint.project`) and linted one project at a time: its files
    are parsed first, their shared facts collected, then every file is checked (only one project's
    trees are held in memory at once)."""
    config = config or LintConfig()
    result = LintResult()
    declares.cache_clear()  # folders are listed once per run, never across runs
    real: dict[Path, str] = {}
    found = [path for path in discover(paths, result.notes, real) if not config.excluded(str(path))]
    order = {str(path): index for index, path in enumerate(found)}
    for root, members in _projects(paths, found, real).items():
        parsed: list[tuple[Source, Context]] = []
        for path in members:
            source = read_source(path)
            tree = source if isinstance(source, Note) else _parse(source)
            if isinstance(source, Note) or isinstance(tree, Note):
                result.notes.append(tree if isinstance(tree, Note) else source)  # type: ignore[arg-type]
                continue
            parsed.append((source, Context.build(tree, source.text, config.assume_gpu)))
        project = Project.of([ctx for _, ctx in parsed], root)
        for source, ctx in parsed:
            ctx.project = project
            outcome = lint_source(source, config, ctx)
            if isinstance(outcome, Note):  # pragma: no cover - parsed above
                result.notes.append(outcome)
                continue
            result.files += 1
            result.violations.extend(outcome)
    result.violations.sort(key=lambda v: order.get(v.path, 0))  # stable: file order, then line order
    return result
