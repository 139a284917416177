# Pattern of pytorch/examples distributed/ddp-tutorial-series multigpu.py: a Trainer class, a toy
# Linear(20, 1) model, the loader built by a helper from a parameter fed an in-memory dataset of the
# sibling module, set_epoch through loader.sampler, saves on rank 0: no finding.
import os

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from datautils import PairsInMemory
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    init_process_group(backend="nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)


class Trainer:
    def __init__(self, model, loader, optimizer, gpu_id):
        self.gpu_id = gpu_id
        self.model = DDP(model.to(gpu_id), device_ids=[gpu_id])
        self.loader = loader
        self.optimizer = optimizer

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        self.loader.sampler.set_epoch(epoch)
        for source, targets in self.loader:
            self._run_batch(source.to(self.gpu_id), targets.to(self.gpu_id))

    def train(self, epochs):
        for epoch in range(epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0:
                torch.save(self.model.module.state_dict(), "checkpoint.pt")


def prepare_dataloader(dataset, batch_size):
    return DataLoader(
        dataset, batch_size=batch_size, pin_memory=True, shuffle=False, sampler=DistributedSampler(dataset)
    )


def main(rank, world_size, epochs, batch_size):
    setup(rank, world_size)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = prepare_dataloader(PairsInMemory(2048), batch_size)
    Trainer(model, loader, optimizer, rank).train(epochs)
    destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(main, args=(world_size, 10, 32), nprocs=world_size)
