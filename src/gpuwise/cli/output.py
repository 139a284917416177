"""Shared output plumbing: every command renders one result object as terminal, JSON or Markdown."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import orjson
from rich.console import Console

SCHEMA_VERSION = 1


def console() -> Console:
    """Terminal output; piped to a file or a CI log (no terminal, no COLUMNS) it is 120 wide, not Rich's 80."""
    import os

    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(highlight=False, soft_wrap=False, width=120)
    return out


def to_json_bytes(payload: dict[str, Any]) -> bytes:
    return orjson.dumps(
        payload, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    )


def emit(
    payload: dict[str, Any],
    kind: str,
    as_json: bool,
    render: Callable[[Console], None],
    markdown: Callable[[], str] | None = None,
    as_markdown: bool = False,
) -> None:
    """Print ``payload`` as JSON (with ``schema``/``kind`` keys) or call the terminal renderer."""
    if as_json:
        document = {"schema_version": SCHEMA_VERSION, "kind": kind, **payload}
        sys.stdout.buffer.write(to_json_bytes(document) + b"\n")
        sys.stdout.flush()
    elif as_markdown and markdown is not None:
        sys.stdout.write(markdown())
        sys.stdout.flush()
    else:
        render(console())
