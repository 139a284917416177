"""docs/extending.md, followed word for word, works: each section is applied to a scratch copy and checked.

A guide whose code fails ruff or no longer fits the tree sends a contributor into a wall on the first
step. So every section of the guide is executed as a reader would follow it, in its own scratch copy
of the repository (src/, examples/, tests/ with its recorded data, pyproject.toml), in document order:

- a ```python block starts with ``# file: PATH``: it is the whole new file at PATH (written, then
  ``ruff check`` and ``ruff format --check`` run on it with the project's configuration);
- a ```diff block is an edit of existing files: ``git apply`` must take it as written, and the Python
  files it touches must stay clean under ``ruff check`` and ``ruff format --check``;
- any other block (```yaml, ```csv, ...) whose first line is ``# file: PATH`` is written to PATH;
  one whose first line is ``# append to: PATH`` has its other lines appended to PATH (in the file's own
  line endings: gpus.csv is CRLF); in a ```json block the ``# file: PATH`` line is not written, as
  JSON has no comments;
- a ```bash block is the section's check: each line runs in the scratch copy (``python`` is this
  interpreter, ``PYTHONPATH`` the copy's src/) and must exit 0.

A block without one of these forms fails the test, so the guide cannot carry fragments that only
look like code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "extending.md"
BIN = Path(sys.executable).parent
RUFF = shutil.which("ruff", path=str(BIN)) or shutil.which("ruff")
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
FILE_HEADER = re.compile(r"#\s*(file|append to):\s*(\S+)")
DIFF_TARGET = re.compile(r"^\+\+\+ b/(\S+)", re.M)
# What a contributor must be able to add by following the guide (issue #24, item 5).
REQUIRED_SECTIONS = (
    "A new command",
    "A new rule",
    "A new tune knob",
    "A new trace format",
    "A new renderer",
    "A new GPU",
    "A new GPU generation",
    "A new model family",
)


@dataclass
class Block:
    language: str
    text: str


@dataclass
class Section:
    title: str
    blocks: list[Block]


def sections(text: str) -> list[Section]:
    """The guide's ``## `` sections, each with its fenced blocks in order."""
    found = []
    for chunk in re.split(r"^## ", text, flags=re.M)[1:]:
        title = chunk.splitlines()[0].strip()
        found.append(Section(title, [Block(m.group(1), m.group(2)) for m in FENCE.finditer(chunk)]))
    return found


SECTIONS = [s for s in sections(GUIDE.read_text(encoding="utf-8")) if s.blocks]


def scratch_copy(root: Path) -> Path:
    """What the guide edits and what its checks read: the package, the examples, the test fixtures."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "src", root / "src", ignore=ignore)
    shutil.copytree(REPO / "examples", root / "examples", ignore=ignore)
    # the tests the guide runs beside its own, with their recorded data (316 KB: a new GPU's check runs
    # the GPU-identity tests, which read a recorded trace)
    shutil.copytree(REPO / "tests", root / "tests", ignore=ignore)
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def run(args: list[str], cwd: Path, shell: bool = False) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(cwd / "src"),
        "COLUMNS": "120",
        "XDG_DATA_HOME": str(cwd / "xdg-data"),  # run stores and user catalogs: the copy's own
        "XDG_CONFIG_HOME": str(cwd / "xdg-config"),
    }
    return subprocess.run(
        args[0] if shell else args,
        cwd=cwd,
        env=env,
        shell=shell,
        executable="/bin/bash" if shell else None,
        capture_output=True,
        text=True,
        timeout=600,
    )


def ruff_clean(paths: list[str], cwd: Path) -> list[str]:
    """ruff's complaints about these files, with the project's configuration (empty: clean)."""
    problems = []
    for args in (["check", "--no-cache"], ["format", "--check", "--no-cache", "--diff"]):
        proc = run([str(RUFF), *args, *paths], cwd)
        if proc.returncode:
            problems.append(f"ruff {args[0]}:\n{proc.stdout}{proc.stderr}")
    return problems


def apply(block: Block, root: Path) -> list[str]:
    """Apply one block to the scratch copy as the guide says; the problems found (empty: fine)."""
    first = block.text.splitlines()[0] if block.text.strip() else ""
    header = FILE_HEADER.fullmatch(first.strip())
    if block.language == "diff":
        proc = subprocess.run(
            ["git", "apply", "--verbose"], input=block.text, cwd=root, capture_output=True, text=True
        )
        if proc.returncode:
            return [f"git apply refused the diff:\n{proc.stderr}\n{block.text}"]
        touched = [p for p in DIFF_TARGET.findall(block.text) if p.endswith(".py")]
        return ruff_clean(touched, root) if touched else []
    if block.language == "bash":
        problems = []
        for line in block.text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            proc = run([line], root, shell=True)
            if proc.returncode:
                problems.append(
                    f"$ {line}\nexit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
                )
        return problems
    if header is None:
        return [f"a ```{block.language} block without a `# file: PATH` first line:\n{block.text}"]
    mode, name = header.groups()
    path = root / name
    if mode == "append to":
        if not path.is_file():
            return [f"`# append to: {name}`: there is no such file to append to"]
        data = path.read_bytes()
        newline = b"\r\n" if b"\r\n" in data else b"\n"
        if data and not data.endswith(b"\n"):
            data += newline
        lines = block.text.splitlines()[1:]
        path.write_bytes(data + b"".join(line.encode() + newline for line in lines))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = block.text.split("\n", 1)[1] if block.language == "json" else block.text
        path.write_text(text, encoding="utf-8")
    return ruff_clean([name], root) if block.language == "python" else []


def test_the_guide_covers_what_a_contributor_adds():
    titles = [s.title for s in sections(GUIDE.read_text(encoding="utf-8"))]
    missing = [t for t in REQUIRED_SECTIONS if not any(title.startswith(t) for title in titles)]
    assert not missing, f"docs/extending.md has no section for: {missing}"


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.title)
def test_a_section_of_the_guide_works_word_for_word(section, tmp_path):
    assert any(b.language == "bash" for b in section.blocks), (
        f"{section.title!r}: a section with code ends with a ```bash block that checks it"
    )
    root = scratch_copy(tmp_path / "repo")
    for block in section.blocks:
        problems = apply(block, root)
        assert not problems, f"{section.title!r}, a ```{block.language} block:\n" + "\n".join(problems)
