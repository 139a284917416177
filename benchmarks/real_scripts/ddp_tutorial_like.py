"""The PyTorch DDP tutorial series' ``multigpu_torchrun.py`` trainer, on CPU with gloo, for
``torchrun --nproc_per_node 2``: a ``Trainer`` class with ``_run_batch`` / ``_run_epoch`` / ``train``,
a DistributedSampler, DDP. ``_run_batch`` calls the model itself, so time spent in it is the step's
own work, whatever the word "batch" in its name suggests.

Injection: --slow-rank R --slow-ms M (rank R sleeps M ms in ``_run_batch``: a noisy neighbour or a
slower device). Fix: --slow-ms 0.
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, train_data, optimizer, slow_s):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = DDP(model)
        self.train_data = train_data
        self.optimizer = optimizer
        self.slow_s = slow_s
        self.times: list[float] = []

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        if self.slow_s:
            time.sleep(self.slow_s)  # the injected slowness of one rank
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        t0 = time.perf_counter()
        for source, targets in self.train_data:
            self._run_batch(source, targets)
            now = time.perf_counter()
            self.times.append(now - t0)
            t0 = now

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    n = 32 * 2 * args.steps
    dataset = TensorDataset(torch.randn(n, 20), torch.randint(0, 4, (n,)))
    train_data = DataLoader(dataset, batch_size=32, shuffle=False, sampler=DistributedSampler(dataset))
    model = torch.nn.Sequential(torch.nn.Linear(20, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    slow_s = args.slow_ms / 1000 if rank == args.slow_rank else 0.0
    trainer = Trainer(model, train_data, optimizer, slow_s)
    trainer.train(1)
    if rank == 0:
        print("RESULT " + json.dumps({"step_s_p50": statistics.median(trainer.times[3:]), "steps": 0}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
