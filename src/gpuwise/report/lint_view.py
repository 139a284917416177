"""Report of `gpuwise lint`: findings grouped by file with their source line, each rule's why and fix once."""

from __future__ import annotations

from gpuwise.lint.catalog import SPECS
from gpuwise.lint.types import LintResult
from gpuwise.report.document import (
    Chart,
    Document,
    Heading,
    Headline,
    Note,
    Paragraph,
    Series,
    Style,
)

__all__ = ["SEVERITIES", "lint_document"]

SEVERITIES = ("critical", "high", "medium", "low", "info")
_STYLES: dict[str, Style] = {"critical": "bad", "high": "bad", "medium": "warn", "low": "", "info": "muted"}


def _summary(result: LintResult) -> str:
    counts = {s: sum(v.severity == s for v in result.violations) for s in SEVERITIES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings"
    fixable = sum(v.edit is not None and v.edit.safe for v in result.violations)
    return (
        f"{result.files} file(s) checked: {summary}"
        + (f"; {fixable} fixable with --fix" if fixable else "")
        + (f"; {result.fixed} fixed" if result.fixed else "")
        + (f"; {len(result.notes)} note(s)" if result.notes else "")
    )


def lint_document(result: LintResult, show_source: bool = False) -> Document:
    """`gpuwise lint`: the summary, each file's name then one line per finding (``line:col severity
    rule message``; with `show_source` the source line under it), then each rule's why and fix once,
    in two lines."""
    doc = Document("gpuwise lint")
    doc.add(Headline(_summary(result), "strong" if result.violations else "good"))
    width = max((len(v.severity) for v in result.violations), default=0)
    path = None
    for v in result.violations:
        if v.path != path:
            path = v.path
            doc.add(Heading(path, 3))
        place = f"cell {v.cell}:{v.line}:{v.col}" if v.cell is not None else f"{v.line}:{v.col}"
        fix = "" if v.edit is None else " (fixable)" if v.edit.safe else " (unsafe fix)"
        line = f"  {place:>7}  {v.severity:<{width}}  {v.rule}  {v.message}{fix}"
        doc.add(Paragraph(line, _STYLES[v.severity]))
        if show_source and v.code:
            doc.add(Note(f"           {v.code[:140]}"))
    doc.add(*(Note(f"note: {n.path}: {n.message}") for n in result.notes))
    seen: dict[str, str] = {}
    for v in result.violations:
        seen.setdefault(v.rule, v.fix)
    if seen:
        doc.add(Heading("Rules and fixes", 2))
    for rule, fix in seen.items():
        spec = SPECS[rule]
        shared = f" (runtime finding: {spec.finding})" if spec.finding else ""
        doc.add(Paragraph(f"{rule}{shared}: {spec.why}"), Note(f"  fix: {fix}", ""))
    by_rule = {rule: sum(v.rule == rule for v in result.violations) for rule in seen}
    if len(by_rule) > 1:
        doc.add(
            Chart(
                "bar",
                "Findings by rule",
                list(by_rule),
                [Series("findings", [float(n) for n in by_rule.values()])],
                x_label="findings",
                y_label="rule",
                horizontal=True,
                description="How often each rule fired: "
                + ", ".join(f"{r} {n}" for r, n in by_rule.items())
                + ".",
                in_text=False,
            )
        )
    return doc
