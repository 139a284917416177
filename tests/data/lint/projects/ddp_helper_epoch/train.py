# Pattern of torchtitan / pytorch/examples distributed trainers split into modules: the sampler is re-seeded
# in a helper module, the evaluation sampler does not shuffle, the checkpoint is read inside
# torch.serialization.safe_globals in a project that requires torch >= 2.6, and synchronize() is opt-in.
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from utils import begin_epoch, build_model

from data import CropFolder


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--resume", default="")
    parser.add_argument("--sync-timing", action="store_true", help="synchronize CUDA to time each step")
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    model = DDP(build_model().cuda(local), device_ids=[local])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start = 0
    if args.resume:
        with torch.serialization.safe_globals([argparse.Namespace]):
            state = torch.load(args.resume, map_location="cpu")
        model.module.load_state_dict(state["model"])
        start = state["epoch"] + 1
    extra = torch.load(os.path.join(args.data, "class_weights.pt"))
    train_set, val_set = CropFolder(args.data, "train"), CropFolder(args.data, "val")
    train_sampler = DistributedSampler(train_set)
    train_loader = DataLoader(
        train_set, batch_size=64, sampler=train_sampler, num_workers=args.workers, pin_memory=True
    )
    val_loader = DataLoader(
        val_set,
        batch_size=64,
        sampler=DistributedSampler(val_set, shuffle=False),
        num_workers=args.workers,
        pin_memory=True,
    )
    criterion = torch.nn.CrossEntropyLoss(weight=extra.cuda(local))
    for epoch in range(start, args.epochs):
        begin_epoch(train_loader, epoch)
        model.train()
        for images, labels in train_loader:  # expect[cudnn_benchmark_off]
            images, labels = images.cuda(local, non_blocking=True), labels.cuda(local, non_blocking=True)
            t0 = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=False)  # expect[zero_grad_keeps_tensors]
            loss.backward()
            optimizer.step()
            if args.sync_timing:
                torch.cuda.synchronize()
                print(f"step {time.perf_counter() - t0:.3f}s")
        model.eval()
        with torch.no_grad():
            for images, _labels in val_loader:
                model(images.cuda(local, non_blocking=True))
        if rank == 0:
            torch.save({"model": model.module.state_dict(), "epoch": epoch}, "checkpoint.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
