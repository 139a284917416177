"""Small training scripts `gpuwise tune` runs in the tests, each written to a temporary directory."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO

# A loader that waits per sample (a storage read) and transforms it, with 0 workers: starved.
STARVED = REPO / "benchmarks" / "real_scripts" / "starved_loader.py"

# Data in memory, a conv net: nothing to find; numerics knobs change its losses by a measurable amount.
NUMERIC = """
import torch
from torch import nn
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.001)
x = torch.randn(8, 3, 16, 16) * 3
y = torch.randn(8, 1) + 3
for step in range(200):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# --mode crash | hang | oom | ok; batches above --max-batch raise torch's OutOfMemoryError, as a GPU would.
FLEX = """
import argparse, time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=8)
p.add_argument("--grad-accum", type=int, default=1)
p.add_argument("--mode", default="ok")
p.add_argument("--max-batch", type=int, default=16)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
if args.mode == "hang":
    time.sleep(3600)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = TensorDataset(torch.randn(20000, 16), torch.randint(0, 2, (20000,)))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
for i, (x, y) in enumerate(loader):
    if args.mode == "crash" and i == 2:
        raise ValueError("the script's own bug")
    if args.batch_size > args.max_batch or args.mode == "oom":
        raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {args.batch_size * 64} MiB")
    loss = nn.functional.cross_entropy(model(x), y) / args.grad_accum
    loss.backward()
    if (i + 1) % args.grad_accum == 0:
        opt.step()
        opt.zero_grad()
"""


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path
