"""The docs stay true to the tree: a short README that shows every command, no dead paths or links.

A command the README does not show does not exist for users; a module ARCHITECTURE.md names that
is gone sends a contributor nowhere. These checks read the files as they are, so a rename or a new
command fails here until the docs follow.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "gpuwise"
README = REPO / "README.md"
ARCHITECTURE = REPO / "ARCHITECTURE.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
README_MAX_BYTES = 12_000  # a front page: what it is, the two commands, one real example per command group

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PACKAGE_HEADING = re.compile(r"^#+\s+`?([a-z_]+)/`?")  # "## memory/ (…)" sets the package of a table
SUBPACKAGES = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
TOP_MODULES = {p.stem for p in SRC.glob("*.py")}
REPO_DIRS = {p.name for p in REPO.iterdir() if p.is_dir() and p.name != "src"}


def prose(text: str) -> str:
    """The text outside fenced code blocks (worked examples there may name files yet to be written)."""
    return FENCE.sub("", text)


def help_commands() -> list[str]:
    """The command names `python -m gpuwise --help` lists, whatever the CLI library draws around them."""
    out = subprocess.run(
        [sys.executable, "-m", "gpuwise", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    choices = re.search(r"\{([a-z][\w-]*(?:,[a-z][\w-]*)+)\}", out)  # argparse: {gpus,models,...}
    if "Commands" not in out and choices:
        return choices.group(1).split(",")
    section = out[out.find("Commands") :]  # click / Typer / Rich: one "name  help" line per command
    return re.findall(r"^[^\w\n]*([a-z][\w-]*)\s{2,}\S", section, re.M)


def module_exists(parts: list[str]) -> bool:
    """gpuwise.a.b names a module (a/b.py, a/b/__init__.py), or a name defined at the top of a/b.py."""
    path = SRC.joinpath(*parts)
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return True
    if len(parts) < 2:
        return False
    module = SRC.joinpath(*parts[:-1])
    source = module.with_suffix(".py") if module.with_suffix(".py").is_file() else module / "__init__.py"
    if not source.is_file():
        return False
    tree = ast.parse(source.read_text(encoding="utf-8"))
    names = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    names |= {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
    }
    names |= {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    return parts[-1] in names


def named_sources(text: str, table_modules: bool) -> set[str]:
    """Source paths and dotted module names a document mentions in code spans, outside code blocks.

    Paths: `gpuwise/x/y.py`, `src/gpuwise/...`, or `x/y.py` under a known subpackage. With
    ``table_modules``, a bare `y.py` in a table row under a "## x/" heading means `gpuwise/x/y.py`
    (ARCHITECTURE.md's per-package tables).
    """
    found: set[str] = set()
    package = ""
    for line in prose(text).splitlines():
        if line.startswith("#"):
            heading = PACKAGE_HEADING.match(line)
            package = heading.group(1) if heading and heading.group(1) in SUBPACKAGES else ""
        for span in CODE_SPAN.findall(line):
            for token in re.split(r"[\s,()]+", span):
                token = token.strip(".:;'\"")
                if "<" in token or "*" in token:
                    continue  # a pattern (`<name>_cmd.py`, `*_view.py`), not a file
                if re.fullmatch(r"gpuwise(\.[a-z_][\w]*)+", token):
                    if token.split(".")[1] in SUBPACKAGES | TOP_MODULES:
                        found.add(token)  # not NVTX range names such as gpuwise.forward
                elif not re.fullmatch(r"[\w./]+\.py", token) or token.split("/", 1)[0] in REPO_DIRS:
                    continue  # not a module, or a path outside the package (tests/, benchmarks/, …)
                elif "gpuwise/" in token:
                    found.add("gpuwise/" + token.split("gpuwise/", 1)[1])
                elif token.split("/", 1)[0] in SUBPACKAGES:
                    found.add("gpuwise/" + token)
                elif table_modules and package and line.startswith("|"):
                    found.add(f"gpuwise/{package}/{token}")
    return found


def missing_sources(names: set[str]) -> list[str]:
    missing = []
    for name in sorted(names):
        if name.endswith(".py"):
            if not (SRC.parent / name).is_file():
                missing.append(name)
        elif not module_exists(name.split(".")[1:]):
            missing.append(name)
    return missing


def test_readme_is_a_short_front_page():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size:,} bytes; move detail to docs/ (limit {README_MAX_BYTES:,})"
    )


def test_readme_shows_every_command():
    commands = help_commands()
    assert len(commands) >= 8, f"could not read the command list from --help: {commands}"
    text = README.read_text(encoding="utf-8")
    missing = [c for c in commands if f"gpuwise {c}" not in text]
    assert not missing, f"commands the README never shows: {missing}"


def test_architecture_names_only_modules_that_exist():
    names = named_sources(ARCHITECTURE.read_text(encoding="utf-8"), table_modules=True)
    assert len(names) > 50, "the path extraction found almost nothing: is the pattern still right?"
    assert not missing_sources(names)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_name_only_modules_that_exist(doc):
    assert not missing_sources(named_sources(doc.read_text(encoding="utf-8"), table_modules=False))


def test_no_path_outside_the_repository():
    offenders = [
        p.name for p in [README, ARCHITECTURE, *DOCS] if "../shared" in p.read_text(encoding="utf-8")
    ]
    assert not offenders, f"these point outside the repository (../shared): {offenders}"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    broken = []
    for target in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor in the same page
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or REPO not in path.parents:
            broken.append(target)
    assert not broken, f"{doc.name}: links to nothing in the repository: {broken}"


def test_the_ci_script_parses_and_ends_in_the_readmes_test_command():
    """A merge once spliced a block into .ci/run's first comment: bash refused the whole script."""
    script = REPO / ".ci" / "run"
    subprocess.run(["bash", "-n", str(script)], check=True)
    lines = [line for line in script.read_text().splitlines() if line and not line.startswith("#")]
    assert lines[-1] == "make test"
