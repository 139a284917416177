"""What `gpuwise profile` records when a script ends badly: a hard kill keeps the steps flushed before
it, a non-zero exit is never `completed`, and a run without a single step says so (`no_steps`).
Every case is a real CPU PyTorch script run under the real CLI."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli, run_torchrun_profile

HEAD = textwrap.dedent(
    """
    import os, signal, sys, time
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        time.sleep(0.01)
    """
)

KILLED_AFTER_4_S = (
    HEAD
    + """
start = time.monotonic()
while time.monotonic() - start < 4.0:  # ~4 s of training, then a kill nothing can catch
    step()
os.kill(os.getpid(), signal.SIGKILL)
"""
)

KILLED_AFTER_THE_WINDOW = HEAD + "for _ in range(12):\n    step()\nos.kill(os.getpid(), signal.SIGKILL)\n"

EXITS_7 = HEAD + "for _ in range(12):\n    step()\nraise SystemExit(7)\n"

# one forward/backward and a hand-written update: no boundary can close a step, whatever detects it
NO_STEP = (
    HEAD
    + """
loss = torch.nn.functional.cross_entropy(model(x), y)
loss.backward()
with torch.no_grad():
    for p in model.parameters():
        p.add_(p.grad, alpha=-0.1)
sys.exit(int(sys.argv[1]))
"""
)


def profile(tmp_path: Path, source: str, *args: str, steps: str = "6"):
    script = tmp_path / "train.py"
    script.write_text(source)
    return run_cli(
        "profile",
        "--json",
        "--steps",
        steps,
        "--warmup",
        "2",
        "--store",
        str(tmp_path / "runs.sqlite"),
        "--",
        sys.executable,
        str(script),
        *args,
        timeout=240,
    )


def test_a_sigkill_after_4_s_of_training_keeps_the_steps_before_it(tmp_path):
    result = profile(tmp_path, KILLED_AFTER_4_S, steps="100000")
    assert result.exit_code == 137, result.stderr[-2000:]
    run = result.json()["runs"][0]
    assert run["status"] == "incomplete"
    assert run["total_steps"] >= 1  # flushed every second: at most the last ~3 s are lost, never all


def test_a_sigkill_after_the_window_is_interrupted_not_completed(tmp_path):
    result = profile(tmp_path, KILLED_AFTER_THE_WINDOW)
    assert result.exit_code == 137
    run = result.json()["runs"][0]
    assert run["measured_steps"] == 6  # written when the window completed, before the kill
    assert run["status"] == "interrupted" and run["error"] == "killed by SIGKILL"


def test_system_exit_7_after_the_window_is_an_error_not_completed(tmp_path):
    result = profile(tmp_path, EXITS_7)
    assert result.exit_code == 7
    doc = result.json()
    run = doc["runs"][0]
    assert run["measured_steps"] == 6  # the window was complete when the script exited 7
    assert doc["status"] == run["status"] == "error"
    assert run["exit_code"] == 7 and "code 7" in run["error"]
    shown = run_cli("runs", "show", "last", "--json", "--store", str(tmp_path / "runs.sqlite"))
    assert shown.json()["status"] == "error"


@pytest.mark.parametrize("code", [0, 5])
def test_a_run_without_any_step_is_no_steps_and_says_so(tmp_path, code):
    result = profile(tmp_path, NO_STEP, str(code))
    assert result.exit_code == code  # the script's exit code is kept
    doc = result.json()
    assert doc["status"] == "no_steps" and doc["runs"][0]["status"] == "no_steps"
    assert doc["measured_steps"] == 0 and doc["exit_code"] == code
    assert any("NO STEPS MEASURED" in note for note in doc["notes"])
    assert any("NO STEPS MEASURED" in note for note in doc["runs"][0]["notes"])
    text = run_cli("runs", "show", "last", "--store", str(tmp_path / "runs.sqlite"))
    assert "no_steps" in text.stdout or "NO STEPS" in text.stdout


RANK_EXITS_3 = textwrap.dedent(
    """
    import os, sys
    import torch, torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10):
        loss = model(torch.randn(8, 16)).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
    dist.barrier()
    dist.destroy_process_group()
    if rank == 1:
        sys.exit(3)
    """
)


@pytest.mark.slow
def test_a_torchrun_rank_exiting_3_is_not_completed(tmp_path):
    path = tmp_path / "ddp.py"
    path.write_text(RANK_EXITS_3)
    result = run_torchrun_profile(path, tmp_path / "runs.sqlite", steps=4)
    assert result.exit_code != 0, result.stderr[-2000:]
    runs = {r["rank"]: r for r in result.json()["runs"]}
    assert set(runs) == {0, 1}, result.stderr[-2000:]
    assert runs[1]["status"] == "error" and runs[1]["exit_code"] == 3
    # rank 0 may end first (0) or be stopped by the agent once rank 1 failed: its status agrees either way
    assert (runs[0]["status"] == "completed") == (runs[0]["exit_code"] == 0), runs[0]["error"]
