"""`gpuwise lint` end to end: exit codes, the four output formats, --fix/--diff, pyproject config,
notebooks, and files that cannot be linted (each a one-line note, the rest still linted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwise.errors import GpuwiseError
from gpuwise.lint import lint_paths
from gpuwise.lint.config import config_from_table, load_config
from gpuwise.lint.fix import fixed_texts, write_atomically
from gpuwise.lint.formats import flake8_lines, sarif

SCRIPT = """import torch
from torch.utils.data import DataLoader

loader = DataLoader(ds, num_workers=4)
model = model.cuda()
state = torch.load("ckpt.pt")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path


def test_exit_codes_follow_fail_on(cli, project: Path) -> None:
    result = cli("lint", str(project), "--format", "flake8")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{project / 'train.py'}:4:10: loader_no_pin_memory DataLoader without pin_memory=True [low]",
        f"{project / 'train.py'}:6:9: torch_load_unsafe torch.load without weights_only: "
        "unpickles arbitrary code on torch < 2.6 [medium]",
    ]
    assert cli("lint", str(project), "--fail-on", "critical").exit_code == 0
    assert cli("lint", str(project), "--select", "input_bound").exit_code == 0  # no such problem here
    bad = cli("lint", str(project), "--fail-on", "severe")
    assert bad.exit_code == 2 and bad.stderr.startswith("gpuwise: error:") and "Traceback" not in bad.stderr
    assert cli("lint", str(project / "missing.py")).exit_code == 2
    unknown = cli("lint", str(project), "--select", "sync_bund")
    assert unknown.exit_code == 2 and "sync_bound" in unknown.stderr


def test_lint_never_imports_torch(project: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom gpuwise.lint import lint_paths\n"
        f"lint_paths([Path({str(project)!r})])\nassert 'torch' not in sys.modules, 'torch imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_json_and_terminal_output(cli, project: Path) -> None:
    document = cli("lint", str(project), "--json").json()
    # through `emit` like every command, at the documented version (docs/json-schema.md)
    assert document["schema_version"] == 2
    assert document["kind"] == "lint" and document["files"] == 1
    pin, load = document["violations"]
    assert pin["finding"] == "pageable_copies" and pin["fixable"] == "safe"
    assert (
        load["rule"] == "torch_load_unsafe" and load["fixable"] == "unsafe" and "weights_only" in load["fix"]
    )
    shown = cli("lint", str(project)).stdout
    assert "1 medium, 1 low" in shown and 'state = torch.load("ckpt.pt")' not in shown
    [line] = [line for line in shown.splitlines() if line.strip().startswith("6:9 ")]  # one line per finding
    assert "torch_load_unsafe" in line and "medium" in line
    source = cli("lint", str(project), "--show-source").stdout
    assert 'state = torch.load("ckpt.pt")' in source


def test_select_takes_a_comma_separated_list(cli, project: Path) -> None:
    both = cli(
        "lint", str(project), "--format", "flake8", "--select", "torch_load_unsafe,loader_no_pin_memory"
    )
    assert len(both.stdout.splitlines()) == 2
    one = cli("lint", str(project), "--format", "flake8", "--select", "torch_load_unsafe,")
    assert [line.split()[1] for line in one.stdout.splitlines()] == ["torch_load_unsafe"]
    bad = cli("lint", str(project), "--select", "torch_load_unsafe,sync_bund")
    assert bad.exit_code == 2 and "sync_bound" in bad.stderr


def test_diff_with_nothing_to_fix_says_so(cli, project: Path) -> None:
    done = cli("lint", str(project), "--diff", "--select", "torch_load_unsafe")
    assert done.stdout == "" and done.exit_code == 0
    assert "nothing to fix: 1 finding(s)" in done.stderr and "--unsafe-fixes" in done.stderr


def test_diff_writes_nothing_and_fix_applies_safe_edits(cli, project: Path) -> None:
    diff = cli("lint", str(project), "--diff").stdout
    assert "+loader = DataLoader(ds, num_workers=4, pin_memory=True)" in diff and "weights_only" not in diff
    assert (project / "train.py").read_text() == SCRIPT
    fixed = cli("lint", str(project), "--fix", "--format", "flake8")
    assert fixed.exit_code == 1  # torch.load is left: its fix is unsafe
    assert "pin_memory=True)" in (project / "train.py").read_text()
    assert [line.split()[1] for line in fixed.stdout.splitlines()] == ["torch_load_unsafe"]
    cli("lint", str(project), "--fix", "--unsafe-fixes")
    assert 'torch.load("ckpt.pt", weights_only=True)' in (project / "train.py").read_text()
    assert cli("lint", str(project)).exit_code == 0


def test_fix_keeps_multiline_formatting_crlf_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_bytes(
        b"from torch.utils.data import DataLoader\r\nx = DataLoader(\r\n    ds,\r\n"
        b"    num_workers=2,\r\n)\r\nd = 'cuda'\r\n"
    )
    path.chmod(0o750)
    [(_, new)] = fixed_texts(lint_paths([path])).values()
    write_atomically(str(path), new)
    assert path.read_bytes() == (
        b"from torch.utils.data import DataLoader\r\nx = DataLoader(\r\n    ds,\r\n    num_workers=2,\r\n"
        b"    pin_memory=True,\r\n)\r\nd = 'cuda'\r\n"
    )
    assert path.stat().st_mode & 0o777 == 0o750
    assert [p.name for p in tmp_path.iterdir()] == ["t.py"]  # no temporary file left behind


def test_sarif_structure(project: Path) -> None:
    log = sarif(lint_paths([project]))
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in {"error", "warning", "note"}
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1


def test_notebook_cells_are_linted_with_cell_positions(tmp_path: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["# torch.load('x') in prose is not code"]},
            {"cell_type": "code", "source": ["%pip install torch\n", "import torch\n"]},
            {"cell_type": "code", "source": "!nvidia-smi\nsd = torch.load('x.pt')\n"},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "explore.ipynb"
    path.write_text(json.dumps(notebook))
    result = lint_paths([tmp_path])
    [v] = result.violations
    assert (v.rule, v.cell, v.line, v.edit) == ("torch_load_unsafe", 2, 2, None)  # no fixes inside notebooks
    assert flake8_lines(result)[0].startswith(f"{path}:cell_2:2:")


def test_unlintable_files_become_notes_and_the_rest_is_linted(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("import torch\ntorch.load('x')\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "latin.py").write_bytes(b"x = '\xe9'\n")
    (tmp_path / "declared.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\ntorch.load('\xe9')\n")
    (tmp_path / "fake.ipynb").write_text("not json")
    (tmp_path / "big.py").write_bytes(b"#" * (5 * 2**20 + 1))
    (tmp_path / "loop").mkdir()
    os.symlink(tmp_path, tmp_path / "loop" / "back")
    result = lint_paths([tmp_path])
    notes = {Path(n.path).name: n.message for n in result.notes}
    assert set(notes) == {"broken.py", "latin.py", "fake.ipynb", "big.py", "back"}
    assert notes["broken.py"].startswith("syntax error at line 1")
    assert "symlink loop" in notes["back"]
    assert sorted(Path(v.path).name for v in result.violations) == ["declared.py", "good.py"]


def test_a_file_symlink_loop_is_a_note_and_encodings_read_as_declared(tmp_path: Path) -> None:
    """Files are resolved once, at discovery: a .py symlink loop is a note (it used to stop the run),
    and the UTF-8 shortcut of reading leaves BOM, cookie and invalid-byte files to the full decoder."""
    os.symlink(tmp_path / "b.py", tmp_path / "a.py")
    os.symlink(tmp_path / "a.py", tmp_path / "b.py")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch\ntorch.load('x')\n")
    (tmp_path / "cp1252.py").write_bytes(b"# coding: cp1252\nimport torch\ntorch.load('\x93x\x94')\n")
    (tmp_path / "utf8.py").write_text("import torch\ntorch.load('é')\n", encoding="utf-8")
    result = lint_paths([tmp_path])
    notes = {Path(n.path).name: n.message for n in result.notes}
    assert set(notes) == {"a.py", "b.py"} and all("cannot read" in m for m in notes.values())
    assert sorted(Path(v.path).name for v in result.violations) == ["bom.py", "cp1252.py", "utf8.py"]
    assert [v.col for v in result.violations] == [1, 1, 1]  # the BOM is not a column


def test_pyproject_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.gpuwise.lint]\n"
        'ignore = ["pageable_copies"]\n'
        'fail-on = "high"\n'
        'exclude = ["vendor/*"]\n'
        "[tool.gpuwise.lint.severity]\n"
        'torch_load_unsafe = "critical"\n'
        "[tool.gpuwise.lint.per-path-ignores]\n"
        '"scripts/*" = ["torch_load_unsafe"]\n'
    )
    for folder in ("src", "scripts", "vendor"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.py").write_text(SCRIPT)
    config = load_config(start=tmp_path / "src")
    assert config.fail_on == "high" and config.origin.endswith("[tool.gpuwise.lint]")
    result = lint_paths([tmp_path], config)
    assert [(Path(v.path).parent.name, v.rule, v.severity) for v in result.violations] == [
        ("src", "torch_load_unsafe", "critical")
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"selct": []}, "did you mean 'select'"),
        ({"ignore": ["torch_lod_unsafe"]}, "did you mean 'torch_load_unsafe'"),
        ({"severity": {"torch_load_unsafe": "urgent"}}, "unknown severity"),
        ({"select": "all"}, "must be a list of strings"),
    ],
)
def test_bad_config_is_a_usage_error(table: dict, message: str) -> None:
    with pytest.raises(GpuwiseError, match=message):
        config_from_table(table, "pyproject.toml")
