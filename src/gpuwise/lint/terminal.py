"""Terminal output: findings grouped by file with their source line, then each rule's why and fix once."""

from __future__ import annotations

from itertools import groupby

from rich.console import Console
from rich.markup import escape

from gpuwise.lint.catalog import SPECS
from gpuwise.lint.types import LintResult

STYLE = {"critical": "bold red", "high": "red", "medium": "yellow", "low": "cyan", "info": "dim"}


def render(console: Console, result: LintResult) -> None:
    for path, group in groupby(result.violations, key=lambda v: v.path):
        console.print(f"[bold]{escape(path)}[/bold]")
        for v in group:
            place = f"cell {v.cell}:{v.line}" if v.cell is not None else f"{v.line}:{v.col}"
            mark = " [green](fixable)[/green]" if v.edit and v.edit.safe else ""
            mark = " [yellow](unsafe fix)[/yellow]" if v.edit and not v.edit.safe else mark
            console.print(
                f"  {place:>9}  [{STYLE[v.severity]}]{v.severity:<8}[/]  [bold]{v.rule}[/bold]  "
                f"{escape(v.message)}{mark}"
            )
            if v.code:
                console.print(f"             [dim]{escape(v.code[:140])}[/dim]")
    for note in result.notes:
        console.print(f"[dim]note:[/dim] {escape(note.path)}: {escape(note.message)}")
    seen: dict[str, str] = {}
    for v in result.violations:
        seen.setdefault(v.rule, v.fix)
    if seen:
        console.print()
    for rule, fix in seen.items():
        spec = SPECS[rule]
        shared = f" (runtime finding: {spec.finding})" if spec.finding else ""
        console.print(f"[bold]{rule}[/bold]{shared}: {escape(spec.why)}")
        console.print(f"  [green]fix:[/green] {escape(fix)}")
    counts = {s: sum(v.severity == s for v in result.violations) for s in STYLE}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings"
    fixable = sum(v.edit is not None and v.edit.safe for v in result.violations)
    console.print(
        f"\n{result.files} file(s) checked: {summary}"
        + (f"; {fixable} fixable with --fix" if fixable else "")
        + (f"; {result.fixed} fixed" if result.fixed else "")
        + (f"; {len(result.notes)} note(s)" if result.notes else "")
    )
