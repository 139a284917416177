"""Render a `Document` in the terminal with Rich: tables, bars, coloured severities."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from gpuwise.report.document import Bars, Bullets, Code, Document, Heading, Paragraph, Style, Table

_STYLE: dict[Style, str] = {
    "": "",
    "muted": "dim",
    "good": "green",
    "warn": "yellow",
    "bad": "bold red",
    "strong": "bold",
}
_BAR_WIDTH = 30


def _table(t: Table) -> RichTable:
    table = RichTable(
        title=t.caption or None,
        title_justify="left",
        title_style="dim",
        header_style="bold",
        show_lines=False,
        expand=False,
    )
    align = (t.align or "").ljust(len(t.columns), "l")  # extra letters (and cells) are cut: strict=False
    for col, a in zip(t.columns, align, strict=False):
        table.add_column(col, justify="right" if a == "r" else "left", overflow="fold")
    for i, row in enumerate(t.rows):
        style = t.row_styles[i] if i < len(t.row_styles) else ""
        table.add_row(*[str(c) for c in row], style=_STYLE.get(style, ""))
    return table


def _bars(b: Bars) -> RichTable:
    grid = RichTable.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(justify="right", no_wrap=True)
    for label, value, text in b.items:
        filled = 0 if b.total <= 0 else round(_BAR_WIDTH * min(max(value, 0.0) / b.total, 1.0))
        bar = Text("█" * filled, style="cyan") + Text("░" * (_BAR_WIDTH - filled), style="dim")
        grid.add_row(label, bar, text)
    if b.total_label:
        grid.add_row(Text("total", style="bold"), "", Text(b.total_label, style="bold"))
    return grid


def render(console: Console, doc: Document) -> None:
    console.print(Text(doc.title, style="bold"))
    if doc.subtitle:
        console.print(Text(doc.subtitle, style="dim"))
    for block in doc.blocks:
        if isinstance(block, Heading):
            if block.level <= 2:
                console.print()
                console.print(Rule(Text(block.text, style="bold cyan"), align="left", style="cyan"))
            else:
                console.print(Text(block.text, style="bold"))
        elif isinstance(block, Paragraph):
            console.print(Text(block.text, style=_STYLE.get(block.style, "")))
        elif isinstance(block, Table):
            console.print(_table(block))
        elif isinstance(block, Bars):
            if block.caption:
                console.print(Text(block.caption, style="dim"))
            console.print(_bars(block))
        elif isinstance(block, Bullets):
            for item in block.items:
                console.print(Text("• ", style="dim") + Text(item, style=_STYLE.get(block.style, "")))
        elif isinstance(block, Code):
            console.print(
                Panel(
                    Text(block.text.rstrip("\n")),
                    title=block.label or None,
                    title_align="left",
                    border_style="dim",
                    expand=False,
                )
            )
