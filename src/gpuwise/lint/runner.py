"""Lint files: discover, read, parse, run every enabled check, drop suppressed hits, sort."""

from __future__ import annotations

import ast
import gc
import warnings
from pathlib import Path

from gpuwise.lint import rules_loop  # noqa: F401  (registers its checks in CHECKS)
from gpuwise.lint.catalog import SPECS
from gpuwise.lint.config import LintConfig
from gpuwise.lint.context import Context
from gpuwise.lint.project import Project, declares, project_root
from gpuwise.lint.rules import CHECKS
from gpuwise.lint.source import Source, discover, read_source
from gpuwise.lint.spans import Positions
from gpuwise.lint.suppress import Suppressions
from gpuwise.lint.types import LintResult, Note, Violation

__all__ = ["lint_paths", "lint_source", "parse"]


def parse(source: Source) -> ast.Module | Note:
    """The file's syntax tree, or a Note saying why it cannot be linted."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes etc. are not ours to report
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
            if suppressed.hides(range(line, line + 1), {spec.id, spec.finding}) or suppressed.hides(
                range(end, end + 1), {spec.id, spec.finding}
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


def _stop(path: Path, roots: list[Path]) -> Path:
    """The path argument a discovered file came from: projects are looked for inside it only."""
    real = path.resolve()
    for root in roots:
        top = root.resolve()
        if top.is_dir() and top in real.parents:
            return top
    return real.parent


def lint_paths(paths: list[Path], config: LintConfig | None = None) -> LintResult:
    """Lint files, directories and notebooks (see `_lint_paths`). The cyclic garbage collector is
    paused for the run: syntax trees hold no reference cycles, so reference counting frees each
    project's trees, and the collector's scans of them cost about a fifth of the lint time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
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
    groups: dict[Path, list[Path]] = {}
    order: dict[str, int] = {}
    for path in discover(paths, result.notes):
        if config.excluded(str(path)):
            continue
        order[str(path)] = len(order)
        groups.setdefault(project_root(path, _stop(path, paths)), []).append(path)
    for root, members in groups.items():
        parsed: list[tuple[Source, Context]] = []
        for path in members:
            source = read_source(path)
            tree = source if isinstance(source, Note) else parse(source)
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
