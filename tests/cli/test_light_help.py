"""Help screens drawn without Rich's Markdown and traceback modules are the screens drawn with them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuwise.cli.light_help import wants_help

_RUN = """
import sys
{preload}
from gpuwise.cli.app import main
try:
    main({argv!r})
except SystemExit:
    pass
loaded = sorted(m for m in ("rich.markdown", "rich.traceback", "pygments", "markdown_it") if m in sys.modules)
print("LOADED=" + ",".join(loaded), file=sys.stderr)
"""


def _help(argv: list[str], preload: str = "") -> tuple[str, str]:
    env = {**os.environ, "COLUMNS": "100", "FORCE_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN.format(preload=preload, argv=argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    loaded = next(line for line in proc.stderr.splitlines() if line.startswith("LOADED="))
    return proc.stdout, loaded.removeprefix("LOADED=")


@pytest.mark.parametrize("argv", [["trace", "--help"], ["--help"], ["runs", "-h"], []])
def test_help_is_the_same_screen_without_markdown_and_traceback(argv):
    light, light_loaded = _help(argv)
    full, full_loaded = _help(argv, preload="import rich.markdown, rich.traceback")
    assert light.strip() and light == full  # same text, same colours (FORCE_COLOR)
    assert light_loaded == ""  # neither module, nor Pygments or markdown-it behind them
    assert "rich.markdown" in full_loaded


_STAND_INS = """
import sys
from gpuwise.cli.light_help import light_rich_help
assert not any(m in sys.modules for m in ("rich.markdown", "rich.traceback", "typer.rich_utils"))
with light_rich_help():
    from rich.markdown import Markdown
    from rich.traceback import Traceback

    made = Markdown("# title")
    real = sys.modules["rich.markdown"]  # the stand-in gave way to the real module on first use
    assert type(made) is real.Markdown
    assert Traceback.from_exception is not None  # class attributes are the real class's
import rich.markdown

assert rich.markdown.Markdown is type(made)
print("OK")
"""


def test_stand_ins_build_the_real_objects_and_leave():
    """In a fresh interpreter (this one may have loaded Rich's help modules already)."""
    proc = subprocess.run([sys.executable, "-c", _STAND_INS], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "OK", proc.stderr


def test_wants_help():
    assert wants_help([]) and wants_help(["trace", "-h"]) and wants_help(["--help"])
    assert not wants_help(["trace", "a.json", "--json"])
