"""Steps without ``optimizer.step()``: manual SGD as in pytorch/examples' word_language_model
(``p.data.add_(p.grad, alpha=-lr)``) must still be measured step by step (issue #11, item 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

import gpuwise

_MANUAL_SGD = """
import sys, time, torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(50, 16), nn.Flatten(), nn.Linear(16 * 8, 50))
criterion = nn.CrossEntropyLoss()
lr = 0.5
for i in range({steps}):
    data = torch.randint(0, 50, (4, 8))
    target = torch.randint(0, 50, (4,))
    model.zero_grad()
    loss = criterion(model(data), target)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    time.sleep(0.01)
print("done", float(loss))
"""


def _manual_sgd(steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    for _ in range(steps):
        model.zero_grad()
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.01)


def test_manual_sgd_steps_are_counted_from_backward_to_backward():
    with gpuwise.profile(warmup=2, store=False, telemetry=False) as prof:
        _manual_sgd(12)
    assert prof.recorder.step_boundary == "backward"
    run = prof.result
    assert run is not None
    # 12 backwards close 11 steps (the last one never ends); 2 are warm-up
    assert run.summary.total_steps == 11 and run.summary.measured_steps == 9
    assert run.summary.phases["backward"].s_per_step > 0
    assert run.summary.phases["forward"].s_per_step > 0


def test_an_optimizer_step_takes_over_from_backward_boundaries():
    """Gradient accumulation: two backwards per optimizer step; the optimizer step ends each step."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuwise.profile(warmup=1, store=False, telemetry=False) as prof:
        for _ in range(6):
            for _ in range(2):
                model(torch.randn(4, 8)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
    assert prof.recorder.step_boundary == "optimizer"
    assert prof.result is not None and prof.result.summary.total_steps == 6


def test_cli_measures_a_real_manual_sgd_script(tmp_path: Path):
    script = tmp_path / "train_manual_sgd.py"
    script.write_text(textwrap.dedent(_MANUAL_SGD.format(steps=20)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwise",
            "profile",
            "--warmup",
            "3",
            "--steps",
            "50",
            "--json",
            "--no-save",
            "--",
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout[proc.stdout.index("{") :])
    summary = data.get("summary", data)
    assert summary["measured_steps"] == 16  # 20 backwards: 19 steps, 3 of them warm-up
    # each step sleeps 10 ms, so a step is at least that (a whole iteration, not a backward-only slice)
    assert summary["step_time_s"] >= 0.01
