"""Shared test helpers: run the CLI in-process and capture its output and exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TRACES = REPO / "tests" / "data" / "traces"


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def run_cli(*args: str, env: dict | None = None, timeout: float = 120) -> CliResult:
    """Run `python -m gpuwise ARGS` in a subprocess (the real entry point, real exit code)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwise", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside the checkout")
    return SHARED


@pytest.fixture
def trace_dir() -> Path:
    """Real profiler traces committed with the tests (sources and licenses in its README)."""
    return TRACES
