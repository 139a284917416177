# Pattern of the pytorch/examples DDP tutorial series: sibling scripts, each its own entry point. This one
# re-seeds its sampler every epoch; torchrun_job.py beside it does not, and this file does not excuse it.
import os

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def train(model, dataset, epochs, rank):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=4, pin_memory=True)
    model = DDP(model.to(rank), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for source, targets in loader:
            source, targets = source.to(rank, non_blocking=True), targets.to(rank, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(source), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    torch.distributed.init_process_group("nccl")
    train(
        torch.hub.load("pytorch/vision", "resnet18"),
        torch.load("data.pt", weights_only=True),
        10,
        int(os.environ["LOCAL_RANK"]),
    )
