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

REPO = Path(__file__).resolve().parents[2]


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
    assert code == 0 and "2.5" in out


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
    return [path, *(p for name, sub in subs.items() for p in _commands(sub, (*path, name)))]


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(("gpuwise", *p)))
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


# ---- (4) interrupted or failed runs: no verdict they did not reach, exit non-zero -------------------------
def _level(target: float, met: bool | None, interrupted: bool = False):
    from gpuwise.loadtest.types import LevelSummary

    return LevelSummary(
        "constant",
        target,
        1.0,
        10,
        10,
        {},
        100,
        100,
        "usage",
        10.0,
        100.0,
        200.0,
        {},
        10.0,
        met,
        [],
        interrupted,
    )


def test_an_interrupted_search_reports_what_its_finished_probes_showed():
    """High misses, low (5 req/s) meets, then Ctrl-C during the next probe: the answer is 5 req/s, marked
    interrupted — never "no probed rate met the SLO"."""
    import asyncio

    from gpuwise.loadtest.search import find_max_rate

    script = {64.0: _level(64.0, False), 5.0: _level(5.0, True)}

    async def probe(rate: float, seed_index: int = 0):
        return script.get(rate)  # None: interrupted

    search = asyncio.run(find_max_rate(probe, 5.0, 64.0))
    assert search.interrupted and search.max_rate_per_s == 5.0
    from gpuwise.loadtest.types import LoadtestResult
    from gpuwise.report import loadtest_view

    result = LoadtestResult("http://x", "completions", "m", True, [], None, search, True)
    text = " ".join(b.text for b in loadtest_view.document(result).blocks if hasattr(b, "text"))
    assert "interrupted" in text.lower() and "No probed rate met" not in text

    async def first_cut(rate: float, seed_index: int = 0):
        return None

    cut = asyncio.run(find_max_rate(first_cut, 5.0, 64.0))
    assert cut.interrupted and cut.max_rate_per_s is None


class _FirstOkThenFail:
    """An OpenAI-style server on 127.0.0.1 that answers the first completion and fails every later one
    (HTTP 500): the load test's own requests all fail after its test request passed."""

    def __enter__(self):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        served = {"n": 0}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, status: int, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                self._json(200, {"data": [{"id": "flaky"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                served["n"] += 1
                if served["n"] > 1:
                    return self._json(500, {"error": "down"})
                usage = {"prompt_tokens": 4, "completion_tokens": 2}
                return self._json(200, {"choices": [{"index": 0, "text": " a b"}], "usage": usage})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_a_load_test_whose_requests_all_failed_exits_1_and_saves_nothing(capsys, tmp_path):
    store = tmp_path / "runs.sqlite"
    with _FirstOkThenFail() as server:
        code, _, err = run(
            capsys, "loadtest", server.url, "--no-stream", "--max-requests", "4", "--store", str(store)
        )
    assert code == 1, err
    assert "every request failed" in err and "http_status" in err and "internal error" not in err
    assert not store.exists() or not sqlite3.connect(store).execute("SELECT * FROM runs").fetchall()


def test_tune_whose_baseline_cannot_start_exits_non_zero(capsys, tmp_path):
    store = tmp_path / "runs.sqlite"
    code, _, err = run(capsys, "tune", "--store", str(store), "--", "python", str(tmp_path / "missing.py"))
    assert code == 1 and "did not run" in err
    assert not store.exists() or not sqlite3.connect(store).execute("SELECT * FROM runs").fetchall()


# ---- (5) runs show -N and last for every kind; a run that cannot be evidence says which can --------------
def test_runs_show_every_kind_and_negative_offsets(capsys, tmp_path):
    store = str(tmp_path / "runs.sqlite")
    code, _, err = run(capsys, "bench", "--quick", "--no-storage", "--store", store)
    assert code == 0, err
    code, out, err = run(capsys, "runs", "show", "-1", "--store", store)
    assert code == 0 and "bench" in out, err
    code, out, err = run(capsys, "runs", "show", "last", "--store", store, "--json")
    assert code == 0 and '"kind": "bench"' in out
    evidence = tmp_path / "bench.json"
    evidence.write_text(out)
    line = refused(capsys, "plan", *M, "--evidence", str(evidence))
    assert "profile" in line and "trace" in line  # says which kinds are evidence
    line = refused(capsys, "plan", *M, "--rate", "2", "--evidence", "last", "--store", store)
    assert "bench run" in line and "load test" in line
    assert "fewer than 5 runs" in refused(capsys, "runs", "show", "-5", "--store", store)


def _quick_examples() -> list[str]:
    from gpuwise.cli.help_examples import EXAMPLES

    quick = ("gpus", "models", "memory", "fit", "cost")
    return [line for path, lines in EXAMPLES.items() if path in quick for line in lines]


@pytest.mark.parametrize("line", _quick_examples())
def test_the_help_examples_run(capsys, line):
    """The examples the help shows for the commands that need no GPU, network or script run as shown."""
    code, _, err = run(capsys, *line.split()[1:])
    assert code == 0, (line, err)
