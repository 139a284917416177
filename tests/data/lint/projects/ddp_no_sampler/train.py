# Pattern of hand-rolled DDP scripts (forum posts, research repos): the loader shuffles without a
# DistributedSampler, gradients are clipped while still scaled, the model is moved inside the loop.
import os

import torch
import torch.distributed as dist
from dataset import TokenWindows
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader


def main():
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    net = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(512, 8, batch_first=True), 6).to(
        device
    )
    model = DistributedDataParallel(net, device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    windows = TokenWindows("tokens.bin")
    # expect-next[missing_distributed_sampler]
    loader = DataLoader(windows, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)
    for epoch in range(10):
        for x in loader:
            model.to(device)  # expect[model_to_device_in_loop]
            x = x.to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect[clip_before_unscale]
            scaler.step(optimizer)
            scaler.update()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), f"epoch{epoch}.pt")


if __name__ == "__main__":
    main()
