"""Find the files to lint and read them: .py files and the code cells of .ipynb notebooks.

Every problem with one file (unreadable, not UTF-8, too large, not a notebook) becomes a
one-line `Note` and the other files are still linted; a symlink loop is walked once.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuwise.diagnose import thresholds as T
from gpuwise.lint.types import Note

__all__ = ["SKIP_DIRS", "SUFFIXES", "Source", "discover", "read_source"]

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        "node_modules",
        ".tox",
        ".mypy_cache",
        ".ruff_cache",
    }
)
SUFFIXES = (".py", ".ipynb")


@dataclass(frozen=True)
class Source:
    """One file's Python text. For a notebook, ``cells`` maps each text line to (cell, line in cell)."""

    path: str
    text: str
    cells: tuple[tuple[int, int], ...] | None = None
    raw_lines: tuple[int, ...] | None = None  # notebooks: each text line's line in the .ipynb (0: unknown)

    @property
    def is_notebook(self) -> bool:
        """Was the source read from a notebook (.ipynb)? Then positions are (cell, line)."""
        return self.cells is not None

    def file_line(self, line: int) -> int | None:
        """The line of the file on disk holding text line ``line``: itself for a .py file, its line
        in the notebook's JSON for a notebook (None when the JSON does not hold it on a line of its
        own); SARIF regions need it."""
        if self.cells is None:
            return line
        if self.raw_lines is None or not 1 <= line <= len(self.raw_lines):
            return None
        return self.raw_lines[line - 1] or None

    def place(self, line: int) -> tuple[int | None, int]:
        """(cell, line) of a 1-based line of ``text``; (None, line) for a .py file."""
        if self.cells is None or not 1 <= line <= len(self.cells):
            return None, line
        return self.cells[line - 1]


def discover(paths: list[Path], notes: list[Note], resolved: dict[Path, str] | None = None) -> Iterator[Path]:
    """Files under the given paths, each once, in a stable order; missing paths become notes.
    ``resolved``, when given, receives each file's resolved path (``os.path.realpath``)."""
    seen: set[str] = set()
    for root in paths:
        if root.is_file():
            key = os.path.realpath(root)
            if key not in seen:
                seen.add(key)
                if resolved is not None:
                    resolved[root] = key
                yield root
        elif root.is_dir():
            yield from _walk(root, seen, notes, resolved)
        else:
            notes.append(Note(str(root), "no such file or directory"))


def _walk(root: Path, seen: set[str], notes: list[Note], resolved: dict[Path, str] | None) -> Iterator[Path]:
    visited_dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in visited_dirs:  # a symlink back into the tree: walk it once
            notes.append(Note(dirpath, "symlink loop: directory already linted, skipped"))
            dirnames[:] = []
            continue
        visited_dirs.add(real)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(SUFFIXES):
                continue
            path = Path(dirpath) / name
            key = os.path.realpath(path)
            if key in seen:
                continue
            seen.add(key)
            if resolved is not None:
                resolved[path] = key
            yield path


def read_source(path: Path) -> Source | Note:
    """The file's text (PEP 263 encoding honoured), or a note saying why it cannot be linted."""
    try:
        size = path.stat().st_size
        if size > T.LINT_MAX_FILE_BYTES:
            return Note(
                str(path),
                f"skipped: {size / 2**20:.1f} MiB, over the {T.LINT_MAX_FILE_BYTES >> 20} MiB limit",
            )
        raw = path.read_bytes()
    except OSError as err:
        return Note(str(path), f"cannot read: {err.strerror or err}")
    if path.suffix == ".ipynb":
        return _notebook(path, raw)
    if b"coding" not in raw[: raw.find(b"\n", raw.find(b"\n") + 1) % (len(raw) + 1)] and not raw.startswith(
        codecs.BOM_UTF8
    ):
        try:  # no BOM, no coding cookie on the first two lines: UTF-8, as detect_encoding would say
            return Source(str(path), raw.decode("utf-8"))
        except UnicodeDecodeError:
            pass  # the slow path below words the error as before
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as err:
        return Note(str(path), f"not valid text in its declared encoding (UTF-8 by default): {_short(err)}")
    return Source(str(path), text.removeprefix("\ufeff"))


def _notebook(path: Path, raw: bytes) -> Source | Note:
    try:
        document = json.loads(raw)
        cells = document["cells"]
    except (ValueError, KeyError, TypeError):
        return Note(str(path), "not a Jupyter notebook (no JSON 'cells' list)")
    lines: list[str] = []
    places: list[tuple[int, int]] = []
    raw_lines: list[int] = []
    finder = _RawLines(raw.decode("utf-8", errors="replace").splitlines())
    code_index = 0
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code_index += 1
        body = cell.get("source", "")
        text = "".join(body) if isinstance(body, list) else str(body)
        for number, line in enumerate(text.splitlines(), start=1):
            lines.append(_without_magic(line))
            places.append((code_index, number))
            raw_lines.append(finder.find(line))
    return Source(str(path), "\n".join(lines) + "\n", tuple(places), tuple(raw_lines))


class _RawLines:
    """Finds, in order, the line of a notebook's JSON text that holds each source line (nbformat
    writes one JSON string per source line); 0 when a line cannot be placed."""

    def __init__(self, raw: list[str]) -> None:
        self.raw = raw
        self.cursor = 0

    def find(self, line: str) -> int:
        if not line.strip():
            return 0  # a blank line would match any string
        needle = json.dumps(line, ensure_ascii=False)[:-1]  # the opening quote and the text
        for index in range(self.cursor, len(self.raw)):
            held = self.raw[index].lstrip()
            if held.startswith(needle) and held[len(needle) :].startswith(('\\n"', '"')):
                self.cursor = index + 1
                return index + 1
        return 0


def _without_magic(line: str) -> str:
    """IPython magics and shell escapes are not Python: blank them, keeping the line count."""
    stripped = line.lstrip()
    return "" if stripped.startswith(("%", "!", "?")) else line


def _short(err: Exception) -> str:
    return str(err).splitlines()[0][:120]
