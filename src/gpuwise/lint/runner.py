"""Lint files: discover, read, parse, run every enabled check, drop suppressed hits, sort."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

from gpuwise.lint.catalog import SPECS
from gpuwise.lint.config import LintConfig
from gpuwise.lint.context import Context
from gpuwise.lint.rules import CHECKS
from gpuwise.lint.source import Source, discover, read_source
from gpuwise.lint.spans import Positions
from gpuwise.lint.suppress import Suppressions
from gpuwise.lint.types import LintResult, Note, Violation

__all__ = ["lint_paths", "lint_source"]


def lint_source(source: Source, config: LintConfig | None = None) -> list[Violation] | Note:
    """Violations in one file's text, most severe first; a Note if it does not parse."""
    config = config or LintConfig()
    enabled = config.enabled(source.path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes etc. are not ours to report
            tree = ast.parse(source.text, filename=source.path)
    except SyntaxError as err:
        cell, line = source.place(err.lineno or 0)
        where = f"cell {cell}, line {line}" if cell else f"line {line}"
        return Note(source.path, f"syntax error at {where}: {err.msg}; not linted")
    except (ValueError, RecursionError) as err:  # null bytes; absurdly deep nesting
        return Note(source.path, f"cannot parse: {err}; not linted")
    ctx = Context.build(tree, source.text, config.assume_gpu)
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
            )
            found.setdefault((spec.id, line, col), violation)
    return sorted(found.values(), key=lambda v: (v.cell or 0, v.line, v.col, v.rule))


def lint_paths(paths: list[Path], config: LintConfig | None = None) -> LintResult:
    """Lint files, directories and notebooks; a file that cannot be linted becomes a note."""
    config = config or LintConfig()
    result = LintResult()
    for path in discover(paths, result.notes):
        if config.excluded(str(path)):
            continue
        source = read_source(path)
        if isinstance(source, Note):
            result.notes.append(source)
            continue
        outcome = lint_source(source, config)
        if isinstance(outcome, Note):
            result.notes.append(outcome)
            continue
        result.files += 1
        result.violations.extend(outcome)
    return result
