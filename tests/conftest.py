"""Shared test helpers: run the CLI in a subprocess and capture its output and exit status.

With GPUWISE_STRICT_SKIPS=1 (set by `make test`, hence CI) a skip fails the run unless its reason says
"needs hardware: ...": a fresh clone with the test extras installed must run every test it can.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "tests" / "data" / "traces"
HARDWARE_SKIP = "needs hardware:"
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
def trace_dir() -> Path:
    """Real profiler traces committed with the tests (sources and licenses in its README)."""
    return TRACES


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("GPUWISE_STRICT_SKIPS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    unexpected = [r for r in skipped if HARDWARE_SKIP not in str(r.longrepr)]
    if unexpected:
        reporter.write_sep(
            "=", f"GPUWISE_STRICT_SKIPS: {len(unexpected)} skip(s) not for missing hardware", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
