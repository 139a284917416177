"""Small training scripts with one injected, labelled bottleneck each, for `gpuwise profile` tests.

Each is a real CPU PyTorch loop. The injected cost is a sleep (or a fixed amount of host work) that
dwarfs the model's own step, so the expected finding holds on a quiet machine and on a loaded one.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from conftest import run_cli

# nanoGPT's data path, rewritten: a uint16 token file read through numpy.memmap at random offsets,
# torch.from_numpy, stacked. WHERE (argv[2]) says where the loop calls get_batch:
#   "before_forward": at the top of each iteration (most scripts);
#   "after_forward":  between the forward and the backward (nanoGPT's train.py prefetch position);
#   "logging":        get_batch is cheap and a per-step report_progress() sleeps instead.
BATCH_FUNCTION = """
import sys, time
import numpy as np
import torch

torch.set_num_threads(1)
torch.manual_seed(0)
path, where = sys.argv[1], sys.argv[2]
np.random.default_rng(0).integers(0, 256, 400_000, dtype=np.uint16).tofile(path)
block, batch = 64, 16


def get_batch():
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - block - 1, (batch,))
    x = torch.stack([torch.from_numpy(data[i : i + block].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block].astype(np.int64)) for i in ix])
    if where != "logging":
        time.sleep(0.03)  # the injected bottleneck: a slow read
    return x, y


def report_progress(loss):
    time.sleep(0.03)  # the injected bottleneck of the "logging" variant


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(256, 64)
        self.head = torch.nn.Linear(64, 256)

    def forward(self, x, y):
        logits = self.head(self.emb(x))
        return torch.nn.functional.cross_entropy(logits.view(-1, 256), y.view(-1))


model = TinyLM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
X, Y = get_batch()
for it in range(int(sys.argv[3]) if len(sys.argv) > 3 else 30):
    if where != "after_forward":
        X, Y = get_batch()
    loss = model(X, Y)
    if where == "after_forward":
        X, Y = get_batch()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if where == "logging":
        report_progress(loss)
"""

# a kept autograd graph: every step's loss (and its saved activations, ~0.75 MiB) stays alive
LEAKING = """
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for step in range(70):
    x = torch.randn(96, 1024)
    y = torch.randint(0, 10, (96,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
    kept.append(loss)
"""

BURNER = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


def profile_script(tmp_path: Path, source: str, *args: str, steps: int = 20, warmup: int = 3) -> dict:
    """`gpuwise profile --json --no-save` of SOURCE written to tmp_path; the JSON document."""
    script = tmp_path / "train.py"
    script.write_text(source)
    result = run_cli(
        "profile",
        "--json",
        "--no-save",
        "--steps",
        str(steps),
        "--warmup",
        str(warmup),
        "--",
        sys.executable,
        str(script),
        *args,
        timeout=240,
    )
    assert result.exit_code == 0, result.stderr[-2000:]
    return result.json()


@contextlib.contextmanager
def cpu_burners(count: int, seconds: float):
    """Processes spinning on the CPU for a bounded time (each killed by its own pid on exit)."""
    procs = [subprocess.Popen([sys.executable, "-c", BURNER.format(seconds=seconds)]) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
