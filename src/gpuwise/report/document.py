"""A tiny document model any result can be turned into, so one view feeds every format.

A view builds a `Document` (headings, paragraphs, tables, bar charts, lists, code) from a
result object; `terminal.render`, `markdown.render` and `html.render` draw it. Text is
plain: each renderer escapes for its own format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# How a renderer emphasizes a block or row ("" = plain); each renderer maps these to its own format.
Style = Literal["", "muted", "good", "warn", "bad", "strong"]


@dataclass
class Heading:
    text: str
    level: int = 2  # 1 = document title, 2 = section, 3 = subsection


@dataclass
class Paragraph:
    text: str
    style: Style = ""


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    align: str = ""  # one letter per column: l or r (default: first column l, others l)
    row_styles: list[Style] = field(default_factory=list)  # one per row (optional)


@dataclass
class Bars:
    """Horizontal bars of parts against a total (e.g. memory by component against the GPU)."""

    items: list[tuple[str, float, str]]  # label, value, value as text
    total: float  # the scale (e.g. device memory)
    total_label: str = ""
    caption: str = ""


@dataclass
class Bullets:
    items: list[str]
    style: Style = ""


@dataclass
class Code:
    text: str
    label: str = ""  # e.g. 'workload.yaml', 'vLLM'
    language: str = ""


Block = Heading | Paragraph | Table | Bars | Bullets | Code


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)
    subtitle: str = ""

    def add(self, *blocks: Block) -> Document:
        self.blocks.extend(blocks)
        return self
