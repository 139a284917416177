"""The starved reference script of `gpuwise tune` (tests/tune/test_tune_trials.py, benchmarks/tune_gain.py).

A DataLoader with 0 workers (PyTorch's default) over a dataset whose every sample waits for a storage
read (--latency-ms, a file on a network disk) and goes through a per-sample transform on the CPU; the
model is tiny, so the loop mostly waits for data. Its fixes are the loader's: workers, prefetching.
"""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--latency-ms", type=float, default=2.0)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)


class Slow(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        time.sleep(args.latency_ms / 1000)  # the read
        x = torch.randn(32, generator=torch.Generator().manual_seed(i))
        for _ in range(20):  # the per-sample transform
            x = torch.tanh(x * 1.01)
        return x, i % 4


model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
generator = torch.Generator().manual_seed(0)
loader = DataLoader(Slow(), batch_size=args.batch_size, shuffle=True, generator=generator)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
