"""The product's surface as a user meets it: every example through every planning command and format,
and every command's --help.

Why: each capability had its own tests while 22 of 404 runs of the shipped examples ended in "internal
error". Here each run must end with exit 0, or exit 2 and exactly one line on stderr naming the
problem; never a traceback, never "internal error". The CLI is called in-process (`gpuwise.cli.app.main`,
the console script's own entry point, with its error contract) so the ~400 runs take about a minute.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from gpuwise.catalog.gpus import clear_cache
from gpuwise.cli.app import app, main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
COMMANDS = ("memory", "plan", "fit", "cost")
FORMATS: dict[str, tuple[str, ...]] = {
    "terminal": (),
    "json": ("--json",),
    "markdown": ("--markdown",),
    "html": (),
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run `gpuwise ARGV` in-process as the console script does; (exit status, stdout, stderr)."""
    clear_cache()
    try:
        main(argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        clear_cache()
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean(code: int, out: str, err: str, argv: list[str]) -> None:
    """Exit 0, or exit 2 with one line on stderr; no internal error, no traceback."""
    shown = " ".join(argv)
    assert "internal error" not in err, f"gpuwise {shown}: {err.strip()}"
    assert "Traceback" not in err + out, f"gpuwise {shown}: traceback\n{err[-2000:]}"
    if code == 0:
        return
    assert code == 2, f"gpuwise {shown}: exit {code}\n{err[-2000:]}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), f"gpuwise {shown}: {err}"


@pytest.fixture(autouse=True)
def _bundled_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """No user GPU file: every GPU an example names is in the bundled catalog, as a new user has it."""
    monkeypatch.delenv("GPUWISE_GPUS", raising=False)
    monkeypatch.setenv("COLUMNS", "120")


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_command_format(
    example: Path, command: str, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, str(example), *FORMATS[fmt]]
    html = tmp_path / "report.html"
    if fmt == "html":
        argv += ["--html", str(html)]
    code, out, err = run(argv, capsys)
    assert_clean(code, out, err, argv)
    if code == 0:
        assert out.strip() or fmt == "html", f"gpuwise {' '.join(argv)} printed nothing"
        if fmt == "html":
            assert html.read_text().lstrip().lower().startswith("<!doctype html>")


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            paths += _command_paths(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


def every_command() -> list[tuple[str, ...]]:
    """Every command and subcommand path of the CLI, the root included."""
    import typer.main

    return _command_paths(typer.main.get_command(app))  # type: ignore[arg-type]


@pytest.mark.parametrize("path", every_command(), ids=lambda p: " ".join(p) or "gpuwise")
def test_help(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*path, "--help"]
    code, out, err = run(argv, capsys)
    assert code == 0 and "internal error" not in err, f"gpuwise {' '.join(argv)}: {err}"
    assert "Usage" in out
