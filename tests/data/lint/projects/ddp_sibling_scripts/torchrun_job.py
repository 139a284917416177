# The torchrun variant of multigpu.py: the same loop, but the sampler is never re-seeded.
import os

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def train(model, dataset, epochs, rank):
    sampler = DistributedSampler(dataset)  # expect[sampler_without_set_epoch]
    loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=4, pin_memory=True)
    model = DDP(model.to(rank), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(epochs):
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
