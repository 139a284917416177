"""Lint and the runtime share finding ids: a profiled script's measured `input_bound` is pointed at
the DataLoader line that causes it (a real CPU profile run of a script with a slow loader)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from conftest import run_cli
from gpuwise.lint.link import script_of, source_hints

SLOW_LOADER = textwrap.dedent(
    """
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)

    class Slow(Dataset):
        def __len__(self):
            return 10000
        def __getitem__(self, i):
            time.sleep(0.002)
            return torch.randn(16), i % 4

    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Slow(), batch_size=8)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if step == 12:
            break
    """
)


def test_source_hints_name_the_line_for_a_measured_finding(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SLOW_LOADER)
    assert script_of(["torchrun", "--nproc-per-node", "2", str(script), "--lr", "0.1"]) == script
    assert script_of(["python", "-c", "pass"]) is None
    hints = source_hints(script, ["input_bound", "straggler"])
    expected = "DataLoader without num_workers: batches load in the training process"
    assert hints == [f"input_bound — see {script}:17 ({expected})"]
    assert source_hints(script, ["straggler"]) == []


def test_profile_points_input_bound_at_the_loader_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SLOW_LOADER)
    result = run_cli(
        "profile", "--json", "--steps", "6", "--warmup", "2", "--no-save", "--", sys.executable, str(script)
    )
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["findings"][0]["id"] == "input_bound"
    assert f"input_bound — see {script}:17" in "\n".join(document["notes"])
