"""Render a `Document` as GitHub-flavoured Markdown (for issues, PRs, wikis)."""

from __future__ import annotations

from gpuwise.report.document import Bars, Bullets, Code, Document, Heading, Paragraph, Table

_BAR_WIDTH = 24


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def _table(t: Table) -> list[str]:
    align = t.align or "l" * len(t.columns)
    out = []
    if t.caption:
        out += [f"*{t.caption}*", ""]
    out.append("| " + " | ".join(_cell(c) for c in t.columns) + " |")
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


def render(doc: Document) -> str:
    out = [f"# {doc.title}", ""]
    if doc.subtitle:
        out += [doc.subtitle, ""]
    for block in doc.blocks:
        if isinstance(block, Heading):
            out += ["#" * max(1, min(block.level, 6)) + " " + block.text, ""]
        elif isinstance(block, Paragraph):
            text = block.text
            if block.style == "strong" or block.style == "bad":
                text = f"**{text}**"
            elif block.style == "muted":
                text = f"*{text}*"
            out += [text, ""]
        elif isinstance(block, Table):
            out += [*_table(block), ""]
        elif isinstance(block, Bars):
            out += [*_bars(block), ""]
        elif isinstance(block, Bullets):
            out += [f"- {item}" for item in block.items] + [""]
        elif isinstance(block, Code):
            if block.label:
                out += [f"**{block.label}**", ""]
            fence = "````" if "```" in block.text else "```"
            out += [fence + block.language, block.text.rstrip("\n"), fence, ""]
    return "\n".join(out).rstrip("\n") + "\n"
