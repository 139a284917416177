"""Shared test helpers: run the CLI in a subprocess and capture its output and exit status.

With GPUWISE_STRICT_SKIPS=1 (set by `make test`, hence CI) a skip fails the run unless its reason says
"needs hardware: ..." or that other projects' files are absent (tests/third_party.py: a fresh clone without
../shared/traces): a fresh clone with the test extras installed must run every test it can. The allowed
skips are counted and printed at the end of every run, never hidden.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import system_tools
from third_party import SARIF_SKIP, THIRD_PARTY_SKIP, DataError, check, data_dir

REPO = Path(__file__).resolve().parents[1]
# Tests live in tests/<package>/ (no __init__.py: module names are unique across the tree), and a few
# reuse another folder's fixtures and helpers by module name (the finops tests record a history with
# tests/monitor/test_monitor_history.py's helpers). Every test folder is importable whatever order pytest
# collects them in.
for _folder in sorted(Path(__file__).parent.iterdir()):
    if any(_folder.glob("test_*.py")) and str(_folder) not in sys.path:
        sys.path.append(str(_folder))
# `gpuwise trace` caches per-rank summaries beside the run store: tests run without it unless they
# point GPUWISE_TRACE_CACHE at a file of their own (tests/trace/test_trace_scale.py).
os.environ.setdefault("GPUWISE_TRACE_CACHE", "off")
# Child processes (the CLI, scripts, servers, the guide's checks) keep their compiled bytecode: where the
# environment sets PYTHONDONTWRITEBYTECODE, every `python -m gpuwise` would recompile the package (~0.2 s
# of CPU per child, hundreds of children per run). The .pyc files go to __pycache__ beside the sources
# (git-ignored), as on any machine without that variable; this process keeps its own setting.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
TRACES = REPO / "tests" / "data" / "traces"  # the project's own traces and HTA measurements
HARDWARE_SKIP = "needs hardware:"
ALLOWED_SKIPS = (HARDWARE_SKIP, THIRD_PARTY_SKIP, SARIF_SKIP)  # what GPUWISE_STRICT_SKIPS lets pass
# A 4-layer Llama with GQA (config.json keys): small enough to simulate or run in seconds on a CPU.
TINY_LLAMA_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 128,
    "intermediate_size": 344,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
}


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


# A child's time limit is CPU seconds (RLIMIT_CPU: the same on a quiet machine and a busy one). Wall time
# only guards against a hang, and allows for a machine where the child gets 1/BUSY_FACTOR of a core: a
# serving plan takes ~9 CPU s, which is 120 s of wall on 2 cores shared by 13 busy processes.
BUSY_FACTOR = 10


def run_limited(argv: list[str], cpu_s: float, **popen: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True)`` with CPU_S seconds of CPU for the child
    (set by prlimit once it started: no ``preexec_fn`` in a parent that may run server threads) and a
    wall-clock guard of BUSY_FACTOR x CPU_S; a child past its CPU budget fails the test saying so."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen) as proc:
        seconds = max(1, int(cpu_s))
        with contextlib.suppress(ProcessLookupError):  # it may have ended already
            resource.prlimit(proc.pid, resource.RLIMIT_CPU, (seconds, seconds + 5))
        try:
            stdout, stderr = proc.communicate(timeout=cpu_s * BUSY_FACTOR)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode != -signal.SIGXCPU, f"{' '.join(argv)} used over {cpu_s:g} CPU s"
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def run_cli(*args: str, env: dict | None = None, timeout: float = 120) -> CliResult:
    """Run `python -m gpuwise ARGS` in a subprocess (the real entry point, real exit code).

    ``timeout`` is the child's budget of CPU seconds; the wall-clock guard is BUSY_FACTOR times that.
    """
    proc = run_limited([sys.executable, "-m", "gpuwise", *args], timeout, env=env, cwd=REPO)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    return run_cli


class ThirdPartyTraces:
    """The third-party data directory; ``traces / "hta/..."`` checks that file (or folder) first.

    Every path a test takes from it is listed in tests/data/third_party.csv and checked (present, size,
    sha256; once per file per session): a missing one skips the test with THIRD_PARTY_SKIP, a different
    one fails it. ``root`` is the directory itself (unchecked).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def __truediv__(self, rel: str) -> Path:
        try:
            missing = check(self.root, str(rel))
        except DataError as err:
            pytest.fail(str(err))
        if missing:
            pytest.skip(f"{THIRD_PARTY_SKIP} ({len(missing)} missing under {self.root}: {missing[0]})")
        return self.root / rel

    def __repr__(self) -> str:
        return f"ThirdPartyTraces({self.root})"


@pytest.fixture(scope="session")
def trace_dir() -> ThirdPartyTraces:
    """Real profiler traces of other projects (tests/third_party.py says where they are looked for)."""
    root = data_dir()
    if not root.is_dir():
        pytest.skip(THIRD_PARTY_SKIP)
    return ThirdPartyTraces(root)


def pytest_sessionstart(session: pytest.Session) -> None:
    """First line of every run: the system tools (chromium, prometheus, ...) that are missing, and how to
    install them, before anything runs (tests/system_tools.py; the Makefile checks the same first)."""
    absent = system_tools.missing()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if absent and reporter is not None:
        reporter.write_line(system_tools.summary(absent), yellow=True, bold=True)


def _skip_reason(report: pytest.TestReport) -> str:
    """The reason of a skip report: longrepr is (path, line, 'Skipped: reason') or a text."""
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)


def _skip_reasons(reporter) -> list[str]:
    return [_skip_reason(r) for r in reporter.stats.get("skipped", [])]


def _unexpected(reasons: list[str]) -> list[str]:
    """Skip reasons GPUWISE_STRICT_SKIPS does not allow (all of them allowed when it is off)."""
    if os.environ.get("GPUWISE_STRICT_SKIPS") != "1":
        return []
    return [r for r in reasons if not any(allowed in r for allowed in ALLOWED_SKIPS)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Strict mode: a skip for any other reason than missing hardware or third-party data fails the run."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and _unexpected(_skip_reasons(reporter)):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    """Print, at the end of every run, how many tests skipped for each allowed reason (never hidden),
    and in strict mode how many skipped for another reason (those fail the run)."""
    reasons = _skip_reasons(terminalreporter)
    for allowed in ALLOWED_SKIPS:
        if count := sum(allowed in reason for reason in reasons):
            terminalreporter.write_sep("=", f"{count} skip(s): {allowed.rstrip(':')}", yellow=True)
    if unexpected := _unexpected(reasons):
        terminalreporter.write_sep(
            "=",
            f"GPUWISE_STRICT_SKIPS: {len(unexpected)} skip(s) not for missing hardware or third-party data",
            red=True,
        )


def run_torchrun_profile(
    script: Path, store: Path, steps: int, warmup: int = 2, args: list[str] | None = None
) -> CliResult:
    """`gpuwise profile --json` of SCRIPT [ARGS] under `torchrun --standalone --nproc_per_node 2` (gloo)."""
    return run_cli(
        "profile",
        "--json",
        "--steps",
        str(steps),
        "--warmup",
        str(warmup),
        "--store",
        str(store),
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(script),
        *(args or []),
        timeout=300,
    )
