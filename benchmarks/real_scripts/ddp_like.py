"""Data-parallel training the way the DDP tutorials do it, for ``torchrun --nproc_per_node 2``:
gloo, a DistributedSampler, DistributedDataParallel, a logged all-reduced loss.

Injection: --slow-rank R --slow-ms M (rank R's forward takes M ms longer: a slower device, or a
noisy neighbour on its node). Fix: --slow-ms 0.
"""

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--slow-rank", type=int, default=1)
parser.add_argument("--slow-ms", type=float, default=0.0)
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        if rank == args.slow_rank and args.slow_ms:
            time.sleep(args.slow_ms / 1000)  # the injected slowness of one rank
        return self.head(self.body(x))


data = TensorDataset(torch.randn(32 * 2 * args.steps, 64), torch.randint(0, 10, (32 * 2 * args.steps,)))
loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, seed=0))
model = DDP(Net())
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
times = []
t0 = time.perf_counter()
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    logged = loss.detach().clone()
    dist.all_reduce(logged)
    now = time.perf_counter()
    times.append(now - t0)
    t0 = now
if rank == 0:
    print("RESULT " + json.dumps({"step_s_p50": statistics.median(times[3:]), "steps": len(times)}))
dist.barrier()
dist.destroy_process_group()
