"""A compute-bound loop with nothing to tune: an MLP on in-memory tensors, ``num_workers=0`` (the
batches are slices of a tensor, nothing to overlap), one intra-op thread set by the script. For
``benchmarks/tune_gain.py --no-gain``: the tuner's candidates (``threads=1``, ``num_workers=0``)
change nothing, so a session that names a winner mistook noise for a gain.
"""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400)
args = parser.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
data = TensorDataset(torch.randn(64 * 64, 256), torch.randint(0, 10, (64 * 64,)))
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while step < args.steps:
    for x, y in DataLoader(data, batch_size=64, shuffle=True):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step >= args.steps:
            break
