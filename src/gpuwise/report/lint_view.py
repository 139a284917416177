"""Report of `gpuwise lint`: findings grouped by file with their source line, each rule's why and fix once."""

from __future__ import annotations

from itertools import groupby

from gpuwise.lint.catalog import SPECS
from gpuwise.lint.types import LintResult
from gpuwise.report.document import (
    Block,
    Chart,
    Code,
    Document,
    Finding,
    Heading,
    Headline,
    Note,
    Series,
    Table,
)

__all__ = ["SEVERITIES", "lint_document"]

SEVERITIES = ("critical", "high", "medium", "low", "info")


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


def lint_document(result: LintResult) -> Document:
    """`gpuwise lint`: the summary, findings grouped by file with their source line, each rule's why
    and fix once, and how often each rule fired."""
    doc = Document("gpuwise lint")
    doc.add(Headline(_summary(result), "strong" if result.violations else "good"))
    blocks: list[Block] = []
    for path, group in groupby(result.violations, key=lambda v: v.path):
        items = list(group)
        rows = []
        for v in items:
            place = f"cell {v.cell}:{v.line}" if v.cell is not None else f"{v.line}:{v.col}"
            fix = "" if v.edit is None else " (fixable)" if v.edit.safe else " (unsafe fix)"
            rows.append([place, v.severity, v.rule, v.message + fix])
        blocks += [
            Heading(path, 3),
            Table(["where", "severity", "rule", "message"], rows, align="rlll", flexible=3),
        ]
        blocks += [Code(v.code[:140], f"{v.path}:{v.line}", "python") for v in items if v.code]
    doc.add(*blocks)
    doc.add(*(Note(f"note: {n.path}: {n.message}") for n in result.notes))
    seen: dict[str, tuple[str, str]] = {}
    for v in result.violations:
        seen.setdefault(v.rule, (v.fix, v.severity))
    if seen:
        doc.add(Heading("Rules and fixes", 2))
    for rule, (fix, severity) in seen.items():
        spec = SPECS[rule]
        shared = f"(runtime finding: {spec.finding})" if spec.finding else ""
        doc.add(Finding(severity, rule, spec.why, fix, shared))
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
