"""Shared output plumbing: every command renders one result as terminal, JSON, Markdown or an HTML file.

A command hands `emit` its JSON payload and a `Document` builder (gpuwise.report.document); the
terminal, Markdown and HTML renderers all draw that one document.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from gpuwise.errors import GpuwiseError

if TYPE_CHECKING:
    from rich.console import Console

    from gpuwise.report.document import Document

__all__ = [
    "SCHEMA_VERSION",
    "HtmlFlag",
    "JsonFlag",
    "MarkdownFlag",
    "console",
    "emit",
    "escape_markdown_html",
    "one_format",
    "to_json_bytes",
    "write_html",
]

# The output flags every command takes (one spelling and help text everywhere).
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON (schema in docs/json-schema.md).")]
MarkdownFlag = Annotated[bool, typer.Option("--markdown", help="Print Markdown.")]
HtmlFlag = Annotated[
    Path | None,
    typer.Option("--html", help="Also write a self-contained HTML report (charts, no scripts) to this file."),
]

SCHEMA_VERSION = 2  # docs/json-schema.md: what changed in each version

_CODE_SPAN = re.compile(r"(`+).*?\1")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINE_BREAK = "<br>"  # the one tag the Markdown renderer writes itself (a newline inside a table cell)


def console() -> Console:
    """Terminal output; piped to a file or a CI log (no terminal, no COLUMNS) 120 wide, not Rich's 80.
    Rich is imported here, not with the module: `--json` and `--markdown` never load it (start-up time)."""
    import os

    from rich.console import Console

    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(highlight=False, soft_wrap=False, width=120)
    return out


_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
_INT64 = 2**63


def _huge_ints_as_floats(node: Any) -> Any:
    """An integer past 64 bits (bytes or FLOPs of a job at the edge of the workload limits) as a float:
    JSON readers keep 53 bits anyway, and orjson refuses the integer."""
    if isinstance(node, dict):
        return {k: _huge_ints_as_floats(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_huge_ints_as_floats(v) for v in node]
    if isinstance(node, int) and not isinstance(node, bool) and abs(node) >= _INT64:
        return float(node)
    return node


def to_json_bytes(payload: dict[str, Any]) -> bytes:
    """Indented JSON bytes (numpy values and non-string keys allowed): every JSON document prints so."""
    try:
        return orjson.dumps(payload, option=_JSON_OPTIONS)
    except TypeError as err:
        if "64-bit" not in str(err):
            raise
        return orjson.dumps(_huge_ints_as_floats(payload), option=_JSON_OPTIONS)


def one_format(as_json: bool, as_markdown: bool) -> None:
    """Refuse --json with --markdown up front (one of them would be silently dropped)."""
    if as_json and as_markdown:
        raise GpuwiseError("--json and --markdown are exclusive: choose one output format")


def _escape_text(text: str) -> str:
    from html import escape  # on use: `--json` never escapes (start-up time)

    return _LINE_BREAK.join(escape(part, quote=False) for part in text.split(_LINE_BREAK))


def escape_markdown_html(markdown: str) -> str:
    """Escape HTML that came in with the inputs (model names, paths) so that a Markdown viewer shows it
    as text; code spans and fenced blocks are shown literally by Markdown already, so they stay as they are.
    """
    out, in_fence = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
        elif in_fence:
            out.append(line)
        else:
            pieces, last = [], 0
            for span in _CODE_SPAN.finditer(line):
                pieces += [_escape_text(line[last : span.start()]), span.group(0)]
                last = span.end()
            out.append("".join([*pieces, _escape_text(line[last:])]))
    return "\n".join(out)


def write_html(document: Document, path: Path) -> None:
    """Write the self-contained HTML report and say where on stderr (stdout stays the chosen format)."""
    from gpuwise.report import html as html_report

    html_report.write(document, path)
    typer.echo(f"HTML report written to {path}", err=True)


def emit(
    payload: dict[str, Any],
    kind: str,
    as_json: bool,
    render: Callable[[Console], None] | None = None,
    markdown: Callable[[], str] | None = None,
    as_markdown: bool = False,
    *,
    document: Callable[[], Document] | None = None,
    html: Path | None = None,
) -> None:
    """Print ``payload`` as JSON (with ``schema_version``/``kind``), as Markdown, or render it; with
    ``html`` also write the HTML report. ``document`` builds the report that every format draws;
    ``render``/``markdown`` are for the few outputs that are not a document."""
    one_format(as_json, as_markdown)
    built: list[Document] = []

    def doc() -> Document:
        if document is None:
            raise GpuwiseError(f"{kind}: no report to render as HTML or Markdown")
        if not built:
            built.append(document())
        return built[0]

    if html is not None:
        write_html(doc(), html)
    if as_json:
        out = {"schema_version": SCHEMA_VERSION, "kind": kind, **payload}
        sys.stdout.buffer.write(to_json_bytes(out) + b"\n")
        sys.stdout.flush()
    elif as_markdown and (markdown is not None or document is not None):
        if markdown is None:
            from gpuwise.report import markdown as markdown_report

            text = markdown_report.render(doc())
        else:
            text = markdown()
        sys.stdout.write(escape_markdown_html(text))
        sys.stdout.flush()
    elif render is not None:
        render(console())
    else:
        from gpuwise.report import terminal

        terminal.render(console(), doc())
