"""Render a `Document` in the terminal with Rich: tables, bars, coloured severities, compact charts.

Every string goes through `Text` (never Rich markup), so a `[` in a model name is shown as it is.
"""

from __future__ import annotations

from rich.console import Console, Group, JustifyMethod
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from gpuwise.report import chart_text
from gpuwise.report.document import (
    Bars,
    Block,
    Bullets,
    Chart,
    Document,
    Finding,
    Heading,
    Headline,
    KeyFigures,
    Note,
    Paragraph,
    Style,
    Table,
    visible_controls,
)

__all__ = ["SEVERITY_STYLE", "render"]

_STYLE: dict[Style, str] = {
    "": "",
    "muted": "dim",
    "good": "green",
    "warn": "yellow",
    "bad": "bold red",
    "strong": "bold",
}
_BAR_WIDTH = 30
SEVERITY_STYLE = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "yellow",
    "low": "cyan",
    "info": "dim",
}


def _t(text: str, style: str = "") -> Text:
    return Text(visible_controls(str(text)), style=style)


def _table(t: Table) -> RichTable:
    table = RichTable(
        title=_t(t.caption) if t.caption else None,
        title_justify="left",
        title_style="dim",
        header_style="bold",
        show_header=t.header,
        show_lines=False,
        expand=False,
    )
    align = (t.align or "").ljust(len(t.columns), "l")  # extra letters (and cells) are cut: strict=False
    for i, (col, a) in enumerate(zip(t.columns, align, strict=False)):
        justify: JustifyMethod = "right" if a == "r" else "left"
        if t.flexible is None:
            table.add_column(_t(col), justify=justify, overflow="fold")
        elif i == t.flexible:  # shrinks first on a narrow terminal, never below its header or 12 chars
            widest = max((len(str(row[i])) for row in t.rows if i < len(row)), default=0)
            floor = max(len(col), min(widest, 12))
            table.add_column(_t(col), justify=justify, overflow="ellipsis", max_width=60, min_width=floor)
        else:
            widest = max((len(str(row[i])) for row in t.rows if i < len(row)), default=0)
            table.add_column(_t(col), justify=justify, no_wrap=True, min_width=max(len(col), widest))
    for i, row in enumerate(t.rows):
        style = t.row_styles[i] if i < len(t.row_styles) else ""
        table.add_row(*[_t(c) for c in row], style=_STYLE.get(style, ""))
    return table


def _bars(b: Bars) -> RichTable:
    grid = RichTable.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(justify="right", no_wrap=True)
    for label, value, text in b.items:
        filled = 0 if b.total <= 0 else round(_BAR_WIDTH * min(max(value, 0.0) / b.total, 1.0))
        bar = Text("█" * filled, style="cyan") + Text("░" * (_BAR_WIDTH - filled), style="dim")
        grid.add_row(_t(label), bar, _t(text))
    if b.total_label:
        grid.add_row(Text("total", style="bold"), "", _t(b.total_label, "bold"))
    return grid


def _finding(f: Finding) -> Panel:
    style = SEVERITY_STYLE.get(f.severity, "")
    head = Text.assemble(
        (f" {f.severity.upper()} ", style), " ", _t(f.title, "bold"), " ", _t(f.detail, "dim")
    )
    parts: list[Text] = [head]
    if f.summary:
        parts.append(_t(f.summary))
    if f.fix:
        parts.append(Text.assemble(("fix: ", "bold"), _t(f.fix)))
    if f.snippet:
        parts.append(_t(f.snippet.rstrip("\n"), "cyan"))
    return Panel(Group(*parts), border_style=(style or "white").split()[-1], padding=(0, 1))


def _figures(k: KeyFigures) -> Text:
    out = Text()
    for i, (label, value) in enumerate(k.items):
        out.append("  ·  " if i else "", "dim").append_text(_t(label, "dim")).append(" ")
        out.append_text(_t(value, "bold"))
    return out


def _chart(console: Console, c: Chart) -> None:
    console.print(_t(chart_text.title(c), "bold"))
    for line in chart_text.lines(c):
        console.print(_t(line, "cyan" if c.kind != "scatter" else ""), overflow="ellipsis", no_wrap=True)


def _block(console: Console, block: Block) -> None:
    if isinstance(block, Heading):
        if block.level <= 2:
            console.print()
            console.print(Rule(_t(block.text, "bold cyan"), align="left", style="cyan"))
        else:
            console.print(_t(block.text, "bold"))
    elif isinstance(block, Headline):
        console.print(_t(block.text, _STYLE.get(block.style, "bold")))
    elif isinstance(block, Paragraph | Note):
        console.print(_t(block.text, _STYLE.get(block.style, "")))
    elif isinstance(block, Table):
        console.print(_table(block))
    elif isinstance(block, Bars):
        if block.caption:
            console.print(_t(block.caption, "dim"))
        console.print(_bars(block))
    elif isinstance(block, KeyFigures):
        if block.caption:
            console.print(_t(block.caption, "dim"))
        console.print(_figures(block))
    elif isinstance(block, Finding):
        console.print(_finding(block))
    elif isinstance(block, Chart):
        if block.in_text:
            _chart(console, block)
    elif isinstance(block, Bullets):
        for item in block.items:
            console.print(Text("• ", style="dim") + _t(item, _STYLE.get(block.style, "")))
    else:
        console.print(
            Panel(
                _t(block.text.rstrip("\n")),
                title=_t(block.label) if block.label else None,
                title_align="left",
                border_style="dim",
                expand=False,
            )
        )


def render(console: Console, doc: Document) -> None:
    """Print the document on a Rich console: headings, paragraphs, tables, lists, code, text charts."""
    console.print(_t(doc.title, "bold"))
    if doc.subtitle:
        console.print(_t(doc.subtitle, "dim"))
    for block in doc.blocks:
        _block(console, block)
