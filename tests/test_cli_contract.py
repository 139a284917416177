"""The CLI contract (issue #25, item 6): bad input gets one line and exit 2 before any work starts;
output paths are checked first; conflicting flags are refused; help has metavars and -h everywhere.

Commands run in-process through `gpuwise.cli.app.main` (the real entry point, minus the interpreter
start-up); the few that need the real process (signals, subprocesses) use the `cli` fixture.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import typer.main

from gpuwise.cli import options
from gpuwise.cli.app import app, main

REPO = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `gpuwise ARGV` run in this process."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as done:
        code = int(done.code or 0) if not isinstance(done.code, str) else 1
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ARGV, assert the contract for refused input (exit 2, one line, no traceback); the line."""
    code, out, err = run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2, (argv, code, out, err)
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), (argv, err)
    assert "internal error" not in err and "Traceback" not in err
    return lines[0]


M = ("-m", "llama-3-8b")


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (("memory", *M, "--rate", "nan"), "--rate"),
        (("plan", *M, "--rate", "nan"), "--rate"),
        (("cost", *M, "--rate", "inf"), "--rate"),
        (("cost", *M, "--usd-per-hour", "nan"), "--usd-per-hour"),
        (("cost", *M, "--usd-per-gpu-hour", "-1"), "--usd-per-gpu-hour"),
        (("cost", *M, "--usd-per-kwh", "-1"), "--usd-per-kwh"),
        (("cost", *M, "--utilization", "0"), "--utilization"),
        (("cost", *M, "--budget", "0"), "--budget"),
        (("cost", *M, "--api-usd-per-mtok", "nan"), "--api-usd-per-mtok"),
        (("memory", *M, "-n", "1000000000000"), "--gpus"),
        (("plan", "--json", *M, "-t", "full-finetune", "-g", "h100-sxm", "-b", "1000000000000"), "--batch"),
        (("memory", *M, "--headroom", "100"), "--headroom"),
        (("memory", *M, "--seq", "0"), "--seq"),
        (("profile", "--interval", "nan", "--", "true"), "--interval"),
        (("loadtest", "http://127.0.0.1:9", "--rate", "nan"), "--rate"),
        (("loadtest", "http://127.0.0.1:9", "--duration", "inf"), "--duration"),
        (("monitor", "report", "--usd-per-kwh", "nan"), "--usd-per-kwh"),
        (("tune", "--time-budget", "nan", "--", "true"), "--time-budget"),
        (("memory", *M, "--set", "serving.rate=nan"), "serving.rate"),
        (("memory", *M, "--set", "usd_per_kwh=-2"), "usd_per_kwh"),
        (("memory", *M, "--set", "train_tokens=inf"), "train_tokens"),
        (("memory", *M, "--batch", "abc"), "--batch"),
    ],
)
def test_bad_numbers_are_one_line_naming_the_option(capsys, argv, names):
    line = refused(capsys, *argv)
    assert names in line
    assert "must be" in line or "Invalid value" in line


def test_a_bad_workload_file_field_names_the_field_and_range(capsys, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("model: llama-3-8b\nbatch_size: 100000000000\n")
    line = refused(capsys, "memory", str(path))
    assert "batch_size" in line and "1,048,576" in line
    path.write_text("model: llama-3-8b\nserving:\n  rate: .nan\n")
    assert "serving.rate" in refused(capsys, "plan", str(path))


def test_every_numeric_option_has_a_range():
    """A new numeric option must get a row in cli/options.py (or be a workload field with a limit)."""
    command = typer.main.get_command(app)
    missing = [
        f"{path} {p.opts[0]}"
        for path, p in options.numeric_params(command)
        if options.limit_for(path, p) is None
    ]
    assert not missing, missing


@pytest.mark.parametrize(
    "argv",
    [
        ("runs", "list", "--store", "nonexistent/dir/x.sqlite"),
        ("memory", *M, "--html", "no-such-dir/x.html"),
        ("bench", "--quick", "--store", "."),
        ("loadtest", "http://127.0.0.1:9", "--html", "."),
        ("profile", "--store", ".", "--", "true"),
    ],
)
def test_paths_are_checked_before_any_work(capsys, argv):
    line = refused(capsys, *argv)
    assert "--store" in line or "--html" in line


def test_a_store_under_a_file_is_refused(capsys, tmp_path):
    """The store's folders cannot be made under a file: refused before the script starts."""
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    line = refused(capsys, "profile", "--store", str(blocker / "a" / "runs.sqlite"), "--", "true")
    assert "not a writable directory" in line


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("plan", *M, "--goal", "cost", "--set", "goal=latency"), "--goal"),
        (("plan", *M, "--rate", "5", "--set", "serving.rate=3"), "--rate"),
        (("lint", "--select", "GW101", "--ignore", "GW101", "src"), "--select"),
        (("lint", "--json", "--format", "sarif", "src"), "--json"),
        (("trace", "--compare", "a.json", "b.json", "--rank", "3"), "--rank"),
        (("cost", *M, "--usd-per-gpu-hour", "2", "--usd-per-hour", "3"), "--usd-per-hour"),
        (("memory", *M, "--json", "--markdown"), "--json"),
    ],
)
def test_conflicting_flags_are_refused(capsys, argv, words):
    assert words in refused(capsys, *argv)


def test_old_spellings_still_work(capsys):
    code, out, _ = run(capsys, "cost", *M, "--usd-per-hour", "2.5", "--json")
    assert code == 0 and '"usd_per_gpu_hour": 2.5' in out or "2.5" in out


@pytest.mark.parametrize("name", ["binary.yaml", "binary.json"])
def test_binary_files_are_one_line(capsys, tmp_path, name):
    path = tmp_path / name
    path.write_bytes(bytes(range(256)) * 8)
    refused(capsys, "models", str(path))
    refused(capsys, "memory", str(path))
    refused(capsys, "exporter", "--web-config", str(path))


def test_a_binary_dataset_is_one_line(capsys, tmp_path):
    path = tmp_path / "binary.py"
    path.write_bytes(b"\x00\x97" * 100)
    assert "--dataset" in refused(capsys, "bench", "--quick", "--no-save", "--dataset", f"{path}:foo")


def _commands(command=None, path=()):
    command = command or typer.main.get_command(app)
    subs = getattr(command, "commands", None)
    if subs is None:
        return [path]
    return [p for name, sub in subs.items() for p in _commands(sub, (*path, name))]


@pytest.mark.parametrize("path", _commands(), ids=" ".join)
def test_help_everywhere_with_h_metavars_and_an_example(capsys, path):
    code, out, err = run(capsys, *path, "-h")
    assert code == 0, err
    assert "<str>" not in out and "<float>" not in out and "<int>" not in out and "<path>" not in out
    assert "Example" in out, f"`gpuwise {' '.join(path)} --help` shows no example"


def test_usage_errors_are_one_line(capsys):
    line = refused(capsys, "memory", "--no-such-option")
    assert "gpuwise memory --help" in line


def test_store_readers_need_an_existing_store(capsys, tmp_path):
    store = tmp_path / "runs.sqlite"
    sqlite3.connect(store).close()
    code, _, err = run(capsys, "runs", "list", "--store", str(store))
    assert code == 0, err
