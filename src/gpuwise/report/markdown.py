"""Render a `Document` as GitHub-flavoured Markdown (for issues, PRs, wikis); charts as text blocks.

HTML that came in with the inputs is escaped afterwards by `cli.output.escape_markdown_html`.
"""

from __future__ import annotations

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
    Table,
    visible_controls,
)

__all__ = ["render"]

_BAR_WIDTH = 24


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def _table(t: Table) -> list[str]:
    align = t.align or "l" * len(t.columns)
    out = []
    if t.caption:
        out += [f"*{t.caption}*", ""]
    out.append("| " + " | ".join(_cell(c) if t.header else "" for c in t.columns) + " |")
    out.append("|" + "|".join("---:" if a == "r" else "---" for a in align.ljust(len(t.columns), "l")) + "|")
    for row in t.rows:
        out.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return out


def _bars(b: Bars) -> list[str]:
    out = []
    if b.caption:
        out += [f"*{b.caption}*", ""]
    width = max((len(label) for label, _, _ in b.items), default=0)
    lines = []
    for label, value, text in b.items:
        filled = 0 if b.total <= 0 else round(_BAR_WIDTH * min(max(value, 0.0) / b.total, 1.0))
        lines.append(f"{label.ljust(width)}  {'█' * filled}{'░' * (_BAR_WIDTH - filled)}  {text}")
    if b.total_label:
        lines.append(f"{'total'.ljust(width)}  {' ' * _BAR_WIDTH}  {b.total_label}")
    return [*out, "```text", *lines, "```"]


def _fenced(text: str, language: str = "") -> list[str]:
    fence = "````" if "```" in text else "```"
    return [fence + language, text.rstrip("\n"), fence]


def _finding(f: Finding) -> list[str]:
    out = [f"**{f.severity.upper()}: {f.title}** {f.detail}".rstrip(), ""]
    if f.summary:
        out += [f.summary, ""]
    if f.fix:
        out += [f"*fix:* {f.fix}", ""]
    if f.snippet:
        out += [*_fenced(f.snippet, "python"), ""]
    return out


def _block(block: Block) -> list[str]:
    if isinstance(block, Heading):
        return ["#" * max(1, min(block.level, 6)) + " " + block.text, ""]
    if isinstance(block, Headline):
        return [f"**{block.text}**", ""]
    if isinstance(block, Paragraph | Note):
        text = block.text
        if block.style in ("strong", "bad"):
            text = f"**{text}**"
        elif block.style == "muted":
            text = f"*{text}*"
        return [text, ""]
    if isinstance(block, Table):
        return [*_table(block), ""]
    if isinstance(block, Bars):
        return [*_bars(block), ""]
    if isinstance(block, KeyFigures):
        head = [f"*{block.caption}*", ""] if block.caption else []
        return [*head, " · ".join(f"{label}: **{value}**" for label, value in block.items), ""]
    if isinstance(block, Finding):
        return _finding(block)
    if isinstance(block, Chart):
        if not block.in_text:
            return []
        return [f"*{chart_text.title(block)}*", "", *_fenced("\n".join(chart_text.lines(block)), "text"), ""]
    if isinstance(block, Bullets):
        return [f"- {item}" for item in block.items] + [""]
    label = [f"**{block.label}**", ""] if block.label else []
    return [*label, *_fenced(block.text, block.language), ""]


def render(doc: Document) -> str:
    """The document as GitHub-flavoured Markdown (tables, code fences, text charts); control
    characters are made visible so no input can break the page."""
    out = [f"# {doc.title}", ""]
    if doc.subtitle:
        out += [doc.subtitle, ""]
    for block in doc.blocks:
        out += _block(block)
    return visible_controls("\n".join(out).rstrip("\n") + "\n")
