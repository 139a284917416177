"""Render a `Document` as one self-contained HTML file: inline CSS and SVG, no script, no network.

A Content-Security-Policy meta tag forbids scripts, fetches and external images, so a hostile string
that slipped past escaping still could not run; every input string is escaped and its bidi controls
made visible. Light and dark follow the reader's setting; print CSS drops the navigation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from html import escape
from pathlib import Path

from gpuwise.errors import GpuwiseError
from gpuwise.report import chart_svg
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

__all__ = ["CSP", "TOC_MIN_SECTIONS", "render", "write"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
TOC_MIN_SECTIONS = 4  # a table of contents once a report has this many sections

_CSS = """
:root{--fg:#1d2330;--muted:#5b6475;--line:#d8dde6;--head:#f3f5f8;--code:#f6f8fa;--track:#eef1f5;
--good:#1a7f37;--warn:#9a6700;--bad:#cf222e;--accent:#3b6fd8;--bg:#fff;--card:#fff}
@media (prefers-color-scheme:dark){:root{--fg:#e4e7ed;--muted:#9aa3b2;--line:#3a4150;--head:#232833;
--code:#1b1f27;--track:#2a303b;--good:#4ac26b;--warn:#d4a72c;--bad:#ff6b6b;--accent:#6f9cf0;
--bg:#14171c;
--card:#f7f8fa}}
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;
margin:2em auto;
padding:0 1em;color:var(--fg);background:var(--bg)}
h1{font-size:1.7em;margin-bottom:.2em}
h2{border-bottom:1px solid var(--line);padding-bottom:.2em;margin-top:1.8em}
.subtitle,.muted{color:var(--muted)}.good{color:var(--good)}.warn{color:var(--warn)}
.bad{color:var(--bad);font-weight:600}.strong{font-weight:600}
.headline{font-size:1.15em;border-left:4px solid var(--accent);padding:.3em .8em;margin:1em 0}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em;width:100%}
th,td{border:1px solid var(--line);padding:.3em .55em;text-align:left;vertical-align:top;
overflow-wrap:anywhere}th{background:var(--head)}
td.r,th.r{text-align:right;font-variant-numeric:tabular-nums}tr.muted td{color:var(--muted)}
tr.good td:first-child{border-left:3px solid var(--good)}
tr.bad td:first-child{border-left:3px solid var(--bad)}
tr.warn td:first-child{border-left:3px solid var(--warn)}
caption{caption-side:top;text-align:left;color:var(--muted);font-style:italic;padding-bottom:.3em}
pre{background:var(--code);border:1px solid var(--line);padding:.7em;overflow-x:auto;
font-size:.88em}
.label{font-weight:600;margin-bottom:.2em}
.bars{margin:.6em 0 1.2em}
.bar{display:grid;grid-template-columns:14em 1fr 9em;gap:.6em;align-items:center;margin:.15em 0}
.track{background:var(--track);height:.9em;border-radius:3px;overflow:hidden}
.fill{background:var(--accent);height:100%}
.val{text-align:right;font-variant-numeric:tabular-nums}
.figures{display:flex;flex-wrap:wrap;gap:.6em;margin:.8em 0}
.figure{border:1px solid var(--line);border-radius:6px;padding:.4em .8em;min-width:9em}
.figure .v{font-size:1.25em;font-weight:600;font-variant-numeric:tabular-nums}
.figure .k{color:var(--muted);font-size:.85em}
.finding{border:1px solid var(--line);border-left:5px solid var(--muted);border-radius:4px;
padding:.5em .9em;margin:.7em 0}
.finding.critical,.finding.high{border-left-color:var(--bad)}
.finding.medium{border-left-color:var(--warn)}
.finding.low{border-left-color:var(--accent)}
.sev{font-size:.8em;font-weight:700;text-transform:uppercase;margin-right:.5em}
.chart{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.4em;
margin:.8em 0}
.chart svg{width:100%;height:auto;display:block}.chart figcaption{color:#5b6475;font-size:.85em}
.missing{border:1px dashed var(--warn);padding:.5em .8em;color:var(--warn)}
nav.toc{border:1px solid var(--line);border-radius:6px;padding:.3em 1em;margin:1em 0}
nav.toc ol{margin:.3em 0;padding-left:1.4em}a{color:var(--accent)}
@media print{body{max-width:none;margin:0;font-size:11pt;color:#000;background:#fff}
nav.toc{display:none}
.chart,.finding,table,pre{break-inside:avoid}h2{break-after:avoid}}
"""


def _text(text: str) -> str:
    return escape(visible_controls(str(text)))


def _cls(style: str) -> str:
    return f' class="{style}"' if style else ""


def _table(t: Table) -> str:
    align = (t.align or "").ljust(len(t.columns), "l")  # extra letters (and cells) are cut: strict=False
    head = "".join(
        f"<th{' class=r' if a == 'r' else ''}>{_text(c)}</th>" for c, a in zip(t.columns, align, strict=False)
    )
    rows = []
    for i, row in enumerate(t.rows):
        style = t.row_styles[i] if i < len(t.row_styles) else ""
        cells = "".join(
            f"<td{' class=r' if a == 'r' else ''}>{_text(c)}</td>" for c, a in zip(row, align, strict=False)
        )
        rows.append(f"<tr{_cls(style)}>{cells}</tr>")
    caption = f"<caption>{_text(t.caption)}</caption>" if t.caption else ""
    thead = f"<thead><tr>{head}</tr></thead>" if t.header else ""
    return f"<table>{caption}{thead}<tbody>{''.join(rows)}</tbody></table>"


def _bars(b: Bars) -> str:
    out = ['<div class="bars">' + (f'<div class="muted">{_text(b.caption)}</div>' if b.caption else "")]
    for label, value, text in b.items:
        pct = 0.0 if b.total <= 0 else 100.0 * min(max(value, 0.0) / b.total, 1.0)
        out.append(
            f'<div class="bar"><span>{_text(label)}</span><div class="track"><div class="fill" '
            f'style="width:{pct:.1f}%"></div></div><span class="val">{_text(text)}</span></div>'
        )
    if b.total_label:
        out.append(
            '<div class="bar"><span class="strong">total</span><span></span><span '
            f'class="val">{_text(b.total_label)}</span></div>'
        )
    return "".join(out) + "</div>"


def _figures(k: KeyFigures) -> str:
    cells = "".join(
        f'<div class="figure"><div class="v">{_text(v)}</div><div class="k">{_text(label)}</div></div>'
        for label, v in k.items
    )
    caption = f'<div class="muted">{_text(k.caption)}</div>' if k.caption else ""
    return f'{caption}<div class="figures">{cells}</div>'


def _finding(f: Finding) -> str:
    parts = [
        f'<div class="finding {_text(f.severity)}"><div><span class="sev">{_text(f.severity)}</span>'
        f"<strong>{_text(f.title)}</strong> <span class=muted>{_text(f.detail)}</span></div>"
    ]
    if f.summary:
        parts.append(f"<p>{_text(f.summary)}</p>")
    if f.fix:
        parts.append(f"<p><strong>fix:</strong> {_text(f.fix)}</p>")
    if f.snippet:
        parts.append(f"<pre><code>{_text(f.snippet.rstrip())}</code></pre>")
    return "".join(parts) + "</div>"


def _chart(c: Chart, draw: Callable[[Chart], str] | None) -> str:
    if draw is None:
        return f'<p class="missing">chart “{_text(c.title)}” not drawn: {_text(chart_svg.INSTALL_HINT)}</p>'
    caption = f"<figcaption>{_text(c.description)}</figcaption>" if c.description else ""
    return f'<figure class="chart">{draw(c)}{caption}</figure>'


def _block(block: Block, draw: Callable[[Chart], str] | None, anchor: str) -> str:
    if isinstance(block, Heading):
        level = max(2, min(block.level, 6))
        return f"{anchor}<h{level}>{_text(block.text)}</h{level}>"
    if isinstance(block, Headline):
        return f'<p class="headline {block.style}">{_text(block.text)}</p>'
    if isinstance(block, Paragraph):
        return f"<p{_cls(block.style)}>{_text(block.text)}</p>"
    if isinstance(block, Note):
        return f"<p{_cls(block.style)}>{_text(block.text)}</p>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Bars):
        return _bars(block)
    if isinstance(block, KeyFigures):
        return _figures(block)
    if isinstance(block, Finding):
        return _finding(block)
    if isinstance(block, Chart):
        return _chart(block, draw)
    if isinstance(block, Bullets):
        return f"<ul{_cls(block.style)}>" + "".join(f"<li>{_text(i)}</li>" for i in block.items) + "</ul>"
    label = f'<div class="label">{_text(block.label)}</div>' if block.label else ""
    return f"{label}<pre><code>{_text(block.text.rstrip())}</code></pre>"


def _toc(doc: Document) -> str:
    sections = [b for b in doc.blocks if isinstance(b, Heading) and b.level <= 2]
    if len(sections) < TOC_MIN_SECTIONS:
        return ""
    items = "".join(f'<li><a href="#s{i}">{_text(h.text)}</a></li>' for i, h in enumerate(sections, 1))
    return f'<nav class="toc" aria-label="contents"><strong>Contents</strong><ol>{items}</ol></nav>'


def render(doc: Document, charts: bool | None = None) -> str:
    """The HTML page; `charts=None` draws charts when matplotlib is installed (a note says when not)."""
    draw = chart_svg.render if (chart_svg.available() if charts is None else charts) else None
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name=viewport content="width=device-width"><meta name=color-scheme content="light dark">'
        f"<title>{_text(doc.title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>{_text(doc.title)}</h1>"
    ]
    if doc.subtitle:
        parts.append(f'<p class="subtitle">{_text(doc.subtitle)}</p>')
    parts.append(_toc(doc))
    section = 0
    for block in doc.blocks:
        anchor = ""
        if isinstance(block, Heading) and block.level <= 2:
            section += 1
            anchor = f'<a id="s{section}"></a>'
        parts.append(_block(block, draw, anchor))
    parts.append("</main></body></html>\n")
    return "".join(parts)


def write(doc: Document, path: str | Path) -> Path:
    """Write the HTML report to `path` (refuses to write into a missing directory); without matplotlib
    the report is written with a visible note per chart and one line on stderr says so."""
    path = Path(path)
    if path.is_dir():
        raise GpuwiseError(f"--html {path} is a directory: give a file name such as {path / 'report.html'}")
    if not path.parent.exists():
        raise GpuwiseError(f"--html {path}: directory {path.parent} does not exist")
    charts = chart_svg.available()
    if not charts and any(isinstance(b, Chart) for b in doc.blocks):
        print(f"gpuwise: warning: {path} has no charts: {chart_svg.INSTALL_HINT}", file=sys.stderr)
    try:
        path.write_text(render(doc, charts), encoding="utf-8")
    except OSError as err:
        raise GpuwiseError(f"cannot write {path}: {err.strerror or err}") from None
    return path
