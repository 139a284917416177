"""A tiny document model any result can be turned into, so one view feeds every format.

A view builds a `Document` (headline, key figures, headings, paragraphs, tables, findings, charts,
lists, code, notes) from a result object; `terminal.render`, `markdown.render` and `html.render` draw
it. Text is plain: each renderer escapes for its own format, and `visible_controls` makes invisible
control characters (bidi overrides) visible first, so an input string cannot reorder what is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Bars",
    "Block",
    "Bullets",
    "Chart",
    "ChartKind",
    "Code",
    "Document",
    "Finding",
    "Heading",
    "Headline",
    "KeyFigures",
    "Note",
    "Paragraph",
    "Series",
    "Style",
    "Table",
    "plain",
    "visible_controls",
]

# How a renderer emphasizes a block or row ("" = plain); each renderer maps these to its own format.
Style = Literal["", "muted", "good", "warn", "bad", "strong"]


@dataclass
class Heading:
    """A section heading; level 1 is the document title, 2 a section, 3 a subsection."""

    text: str
    level: int = 2  # 1 = document title, 2 = section, 3 = subsection


@dataclass
class Paragraph:
    """A paragraph of running text, optionally styled (warn, good, bad, muted, ...)."""

    text: str
    style: Style = ""


@dataclass
class Table:
    """A table of text cells (every renderer aligns, wraps and styles it): columns, rows, optional
    caption, per-column alignment, per-row style; `flexible` names the column that wraps."""

    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    align: str = ""  # one letter per column: l or r (default: first column l, others l)
    row_styles: list[Style] = field(default_factory=list)  # one per row (optional)
    header: bool = True  # False: a key/value table whose column names say nothing
    flexible: int | None = (
        None  # the column that gives way (ellipsis) on a narrow terminal; others never wrap
    )


@dataclass
class Bars:
    """Horizontal bars of parts against a total (e.g. memory by component against the GPU)."""

    items: list[tuple[str, float, str]]  # label, value, value as text
    total: float  # the scale (e.g. device memory)
    total_label: str = ""
    caption: str = ""


@dataclass
class Bullets:
    """A bulleted list, optionally styled."""

    items: list[str]
    style: Style = ""


@dataclass
class Code:
    """A block to paste (YAML, JSON, a command), with a label and a language for highlighting."""

    text: str
    label: str = ""  # e.g. 'workload.yaml', 'vLLM'
    language: str = ""


@dataclass
class Headline:
    """The one-sentence answer at the top of a report (a verdict, a speed-up)."""

    text: str
    style: Style = "strong"


@dataclass
class KeyFigures:
    """A few labelled numbers a reader takes away (label, value as text)."""

    items: list[tuple[str, str]]
    caption: str = ""


@dataclass
class Finding:
    """A diagnosed problem with its fix: severity decides the colour."""

    severity: str  # critical | high | medium | low | info (gpuwise.diagnose.finding.Severity)
    title: str
    summary: str = ""
    fix: str = ""
    detail: str = ""  # e.g. "[input-bound, confidence high]", the expected gain
    snippet: str = ""  # code that applies the fix


@dataclass
class Note:
    """A short aside in a muted (or given) style: sources, caveats, hints."""

    text: str
    style: Style = "muted"


ChartKind = Literal["bar", "grouped", "stacked", "line", "scatter", "waterfall"]


@dataclass
class Series:
    """One named series of a chart: one value per category (or per x value), in the chart's unit."""

    name: str
    values: list[float]


@dataclass
class Chart:
    """Data for a chart; the HTML renderer draws it (matplotlib SVG), text renderers draw a compact form.

    bar / grouped / stacked / waterfall: one value per category and series (grouped: side by side;
    a waterfall's series[0] holds the steps that add up to the total). line: series over `categories`
    (x as text; when some are "", only the labelled ones get a tick) with `marked` points (outliers).
    scatter: `x` against series[0] with `categories` as point labels, `marked` = chosen.
    """

    kind: ChartKind
    title: str
    categories: list[str]
    series: list[Series]
    x_label: str = ""
    y_label: str = ""
    x: list[float] = field(default_factory=list)  # scatter only
    marked: list[int] = field(default_factory=list)  # indices drawn highlighted
    mark_label: str = ""  # legend text of the highlighted points (e.g. "recommended", "outlier")
    horizontal: bool = False  # bar / stacked: categories down the side (long names)
    description: str = ""  # the text alternative (what the chart shows, in a sentence)
    in_text: bool = True  # False: HTML only (a table next to it already shows the same in text)


Block = Heading | Paragraph | Table | Bars | Bullets | Code | Headline | KeyFigures | Finding | Note | Chart


def plain(count: int, *then: Style) -> list[Style]:
    """Row styles: `count` plain rows, then the given ones (e.g. a bold total row)."""
    return [*([""] * count), *then]  # type: ignore[list-item]  # "" is a Style; mypy widens it to str


@dataclass
class Document:
    """A format-neutral report: a title, a subtitle and blocks, drawn by report/terminal.py,
    markdown.py and html.py alike (so the three outputs never disagree)."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    subtitle: str = ""

    def add(self, *blocks: Block) -> Document:
        """Append blocks; returns the document so calls chain."""
        self.blocks.extend(blocks)
        return self

    def include(self, other: Document, level: int = 2) -> Document:
        """Append another view's document as a section (its title becomes a heading): one report of two
        results, e.g. cost and buy-vs-rent."""
        return self.add(Heading(other.title, level), *other.blocks)


# Bidi controls and other invisible format characters: an input string (a kernel or file name) carrying
# them could make a report show text in another order than it holds (CVE-2021-42574, "Trojan Source").
_INVISIBLE = {
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    0x7F,
    0x061C,
    0x200B,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0xFEFF,
}
_VISIBLE = {code: f"<U+{code:04X}>" for code in _INVISIBLE}


def visible_controls(text: str) -> str:
    """Replace control and bidi characters by a visible <U+XXXX> (newlines and tabs stay)."""
    return text.translate(_VISIBLE)
