"""Render a `Document` as one self-contained HTML file (inline CSS, no scripts, no network)."""

from __future__ import annotations

from html import escape
from pathlib import Path

from gpuwise.errors import GpuwiseError
from gpuwise.report.document import Bars, Bullets, Code, Document, Heading, Paragraph, Table

_CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1d2330}
h1{font-size:1.7em;margin-bottom:.2em}h2{border-bottom:1px solid #d8dde6;padding-bottom:.2em;margin-top:1.8em}
.subtitle{color:#5b6475;margin-top:0}.muted{color:#5b6475}.good{color:#1a7f37}.warn{color:#9a6700}
.bad{color:#cf222e;font-weight:600}
.strong{font-weight:600}table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em;width:100%}
th,td{border:1px solid #d8dde6;padding:.3em .55em;text-align:left;vertical-align:top}th{background:#f3f5f8}
td.r,th.r{text-align:right;font-variant-numeric:tabular-nums}tr.muted td{color:#5b6475}
tr.good td:first-child{border-left:3px solid #1a7f37}
tr.bad td:first-child{border-left:3px solid #cf222e}tr.warn td:first-child{border-left:3px solid #9a6700}
caption{caption-side:top;text-align:left;color:#5b6475;font-style:italic;padding-bottom:.3em}
pre{background:#f6f8fa;border:1px solid #d8dde6;padding:.7em;overflow-x:auto;font-size:.88em}
.label{font-weight:600;margin-bottom:.2em}
.bars{margin:.6em 0 1.2em}
.bar{display:grid;grid-template-columns:14em 1fr 9em;gap:.6em;align-items:center;margin:.15em 0}
.track{background:#eef1f5;height:.9em;border-radius:3px;overflow:hidden}.fill{background:#3b6fd8;height:100%}
.val{text-align:right;font-variant-numeric:tabular-nums}
"""


def _cls(style: str) -> str:
    return f' class="{style}"' if style else ""


def _table(t: Table) -> str:
    align = (t.align or "").ljust(len(t.columns), "l")  # extra letters (and cells) are cut: strict=False
    head = "".join(
        f"<th{' class=r' if a == 'r' else ''}>{escape(c)}</th>"
        for c, a in zip(t.columns, align, strict=False)
    )
    rows = []
    for i, row in enumerate(t.rows):
        style = t.row_styles[i] if i < len(t.row_styles) else ""
        cells = "".join(
            f"<td{' class=r' if a == 'r' else ''}>{escape(str(c))}</td>"
            for c, a in zip(row, align, strict=False)
        )
        rows.append(f"<tr{_cls(style)}>{cells}</tr>")
    caption = f"<caption>{escape(t.caption)}</caption>" if t.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _bars(b: Bars) -> str:
    out = ['<div class="bars">' + (f'<div class="muted">{escape(b.caption)}</div>' if b.caption else "")]
    for label, value, text in b.items:
        pct = 0.0 if b.total <= 0 else 100.0 * min(max(value, 0.0) / b.total, 1.0)
        out.append(
            f'<div class="bar"><span>{escape(label)}</span><div class="track"><div class="fill" '
            f'style="width:{pct:.1f}%">'
            f'</div></div><span class="val">{escape(text)}</span></div>'
        )
    if b.total_label:
        out.append(
            '<div class="bar"><span class="strong">total</span><span></span><span '
            f'class="val">{escape(b.total_label)}</span></div>'
        )
    return "".join(out) + "</div>"


def render(doc: Document) -> str:
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport "
        "content='width=device-width'>"
        f"<title>{escape(doc.title)}</title><style>{_CSS}</style></head><body><h1>{escape(doc.title)}</h1>"
    ]
    if doc.subtitle:
        parts.append(f'<p class="subtitle">{escape(doc.subtitle)}</p>')
    for block in doc.blocks:
        if isinstance(block, Heading):
            level = max(2, min(block.level, 6))
            parts.append(f"<h{level}>{escape(block.text)}</h{level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p{_cls(block.style)}>{escape(block.text)}</p>")
        elif isinstance(block, Table):
            parts.append(_table(block))
        elif isinstance(block, Bars):
            parts.append(_bars(block))
        elif isinstance(block, Bullets):
            parts.append(
                f"<ul{_cls(block.style)}>" + "".join(f"<li>{escape(i)}</li>" for i in block.items) + "</ul>"
            )
        elif isinstance(block, Code):
            label = f'<div class="label">{escape(block.label)}</div>' if block.label else ""
            parts.append(f"{label}<pre><code>{escape(block.text.rstrip())}</code></pre>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write(doc: Document, path: str | Path) -> Path:
    """Write the HTML report to `path` (refuses to write into a missing directory)."""
    path = Path(path)
    if path.is_dir():
        raise GpuwiseError(f"--html {path} is a directory: give a file name such as {path / 'plan.html'}")
    if not path.parent.exists():
        raise GpuwiseError(f"--html {path}: directory {path.parent} does not exist")
    try:
        path.write_text(render(doc), encoding="utf-8")
    except OSError as err:
        raise GpuwiseError(f"cannot write {path}: {err.strerror or err}") from None
    return path
