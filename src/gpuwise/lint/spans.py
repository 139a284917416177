"""Source positions: AST (line, UTF-8 byte column) to character offsets, and keyword-insertion edits
that keep the call's formatting (same line, or one argument per line with its indentation)."""

from __future__ import annotations

import ast
from functools import cached_property
from itertools import accumulate

from gpuwise.lint.types import Edit

__all__ = ["Positions", "add_keyword"]


class Positions:
    """Converts AST positions (1-based line, UTF-8 byte column) to character offsets in `text`,
    as edits need; line tables are built on first use."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def lines(self) -> list[str]:
        """The text's lines, line endings kept."""
        return self.text.splitlines(keepends=True)

    @cached_property
    def starts(self) -> list[int]:
        """Character offset at which each line starts (0-based, one per line)."""
        return list(accumulate(map(len, self.lines[:-1]), initial=0)) if self.lines else []

    def column(self, line: int, byte_col: int) -> int:
        """0-based character column of an AST byte column."""
        if not 1 <= line <= len(self.lines):
            return byte_col
        text = self.lines[line - 1]
        return byte_col if text.isascii() else len(text.encode()[:byte_col].decode(errors="ignore"))

    def offset(self, line: int, byte_col: int) -> int:
        """Character offset in the text of AST position (`line` 1-based, `byte_col` in UTF-8 bytes)."""
        return self.starts[line - 1] + self.column(line, byte_col)


def add_keyword(pos: Positions, call: ast.Call, text: str) -> Edit | None:
    """Insert ``name=value`` as the call's last argument; None if the call's shape is unusual."""
    if call.end_lineno is None or call.end_col_offset is None:
        return None
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    if not arguments:
        close = pos.offset(call.end_lineno, call.end_col_offset) - 1
        if pos.text[close] != ")" or pos.text[close - 1] != "(":
            return None
        return Edit(close, close, text)
    last = max(arguments, key=lambda a: (a.lineno, a.col_offset))
    if last.end_lineno is None or last.end_col_offset is None:
        return None
    at = pos.offset(last.end_lineno, last.end_col_offset)
    line_text = pos.lines[last.lineno - 1]
    indent = line_text[: len(line_text) - len(line_text.lstrip())]
    own_line = not line_text[: pos.column(last.lineno, last.col_offset)].strip()
    if own_line and last.lineno > call.lineno:
        newline = "\r\n" if line_text.endswith("\r\n") else "\n"
        return Edit(at, at, f",{newline}{indent}{text}")
    return Edit(at, at, f", {text}")
