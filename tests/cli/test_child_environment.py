"""The user's program under `gpuwise profile` sees the environment it was started with: gpuwise's own
start-up choices (NumPy's OPENBLAS_NUM_THREADS, cli/app.py) never reach it. The only additions are the
profiler's own variables (profile/launcher.py `profiled_env`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import run_cli

# What `profiled_env` adds for the profiler's bootstrap: the run's config, where gpuwise is, and the
# bootstrap directory first on PYTHONPATH.
PROFILER_KEYS = {"GPUWISE_PROFILE", "GPUWISE_PROFILE_PATH", "PYTHONPATH"}

CHILD = "import json, os, sys\njson.dump(dict(os.environ), open(sys.argv[1], 'w'))\n"


@pytest.mark.parametrize("user_blas_threads", [None, "3"])
def test_profiled_program_sees_the_environment_unchanged(tmp_path: Path, user_blas_threads: str | None):
    script, seen_file = tmp_path / "child.py", tmp_path / "env.json"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["GPUWISE_TEST_MARKER"] = "kept as is"
    if user_blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = user_blas_threads
    result = run_cli(
        "profile", "--json", "--no-save", "--", sys.executable, str(script), str(seen_file), env=env
    )
    assert result.exit_code == 0, result.stderr
    seen = json.loads(seen_file.read_text())
    assert seen.get("OPENBLAS_NUM_THREADS") == user_blas_threads
    assert {k: v for k, v in seen.items() if k not in PROFILER_KEYS} == {
        k: v for k, v in env.items() if k not in PROFILER_KEYS
    }
    # PYTHONPATH: the profiler's bootstrap directory first, then the user's own, unchanged
    user_path = env.get("PYTHONPATH")
    assert seen["PYTHONPATH"].split(os.pathsep)[1:] == (user_path.split(os.pathsep) if user_path else [])
