"""The live monitor's frame as plain lines with ANSI styles, drawn without Rich (issue 30: CPU at 1 Hz).

Why: laying out the monitor's tables with Rich took ~25-40 ms of CPU per frame, most of the live view's
cost (benchmarks/monitor_overhead.py). This renderer knows the few block types the monitor document
uses (title, key figures, tables, notes) and lays tables out in one pass: each column as wide as its
widest cell, two spaces apart, the flexible column wrapped to what is left of the width. Other block
types fall back to their text. Styles are ANSI SGR codes when ``color`` is set.
"""

from __future__ import annotations

import textwrap

from gpuwise.report.document import Document, KeyFigures, Note, Paragraph, Style, Table, visible_controls
from gpuwise.report.table_fit import GAP, column_widths, flexible_floor

__all__ = ["lines"]

_SGR: dict[str, str] = {
    "": "",
    "muted": "2",
    "good": "32",
    "warn": "33",
    "bad": "1;31",
    "strong": "1",
    "bold": "1",
}


def _style(text: str, style: Style | str, color: bool) -> str:
    code = _SGR.get(style, "")
    return f"\x1b[{code}m{text}\x1b[0m" if color and code and text else text


def _wrap(text: str, width: int) -> list[str]:
    # words are not cut (a GPU name or reason stays whole even if it overflows its column)
    return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]


def _table(t: Table, width: int, color: bool) -> list[str]:
    widths = column_widths(t)
    flex = t.flexible
    if flex is not None:
        others = sum(w for i, w in enumerate(widths) if i != flex) + GAP * (len(widths) - 1)
        widths[flex] = max(flexible_floor(t, flex), min(widths[flex], width - others))
    align = t.align.ljust(len(t.columns), "l")

    def line(cells: list[list[str]], style: str) -> list[str]:
        out = []
        for k in range(max(len(c) for c in cells)):
            parts = []
            for i, w in enumerate(widths):
                text = cells[i][k] if k < len(cells[i]) else ""
                parts.append(text.rjust(w) if align[i] == "r" else text.ljust(w))
            out.append(_style((" " * GAP).join(parts).rstrip(), style, color))
        return out

    def cells(row: list[str]) -> list[list[str]]:
        row = [visible_controls(str(c)) for c in row] + [""] * (len(widths) - len(row))
        return [_wrap(c, widths[i]) if i == flex else [c] for i, c in enumerate(row[: len(widths)])]

    out = [_style(visible_controls(t.caption), "muted", color)] if t.caption else []
    if t.header:
        out += line([[c] for c in t.columns], "bold")
    for i, row in enumerate(t.rows):
        out += line(cells(row), t.row_styles[i] if i < len(t.row_styles) else "")
    return out


def _figures(k: KeyFigures, color: bool) -> list[str]:
    parts = [f"{_style(visible_controls(a), 'muted', color)} {_style(visible_controls(b), 'bold', color)}"
             for a, b in k.items]  # fmt: skip
    out = [_style(visible_controls(k.caption), "muted", color)] if k.caption else []
    return [*out, "  ·  ".join(parts)]


def lines(doc: Document, width: int, color: bool = True) -> list[str]:
    """The document as screen lines no wider than ``width`` (plus ANSI codes when ``color``)."""
    out = [_style(visible_controls(doc.title), "bold", color)]
    if doc.subtitle:
        out.append(_style(visible_controls(doc.subtitle), "muted", color))
    for block in doc.blocks:
        if isinstance(block, Table):
            out += _table(block, width, color)
        elif isinstance(block, KeyFigures):
            out += _figures(block, color)
        elif isinstance(block, Note | Paragraph):
            out += [_style(s, block.style, color) for s in _wrap(visible_controls(block.text), width)]
        else:  # not in the monitor document; shown as its text
            out += _wrap(visible_controls(str(getattr(block, "text", block))), width)
    return out
