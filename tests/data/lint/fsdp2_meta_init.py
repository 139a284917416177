# Pattern of pytorch/examples distributed/FSDP2/train.py: meta-device init, fully_shard before the
# optimizer, weights_only loads, rank-0 saves, device-side batches, mixed precision behind a flag.
import os

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def gather_full(net):
    full = {}
    for name, shard in net.state_dict().items():
        tensor = shard.full_tensor()
        if torch.distributed.get_rank() == 0:
            full[name] = tensor.cpu()
    return full


def main(args, build):
    rank = int(os.environ["LOCAL_RANK"])
    device = torch.device(f"cuda:{rank}")
    torch.distributed.init_process_group(backend="nccl", device_id=device)
    with torch.device("meta"):
        net = build()
    options = {}
    if args.mixed_precision:
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in net.layers:
        fully_shard(block, **options)
    fully_shard(net, **options)
    if args.resume:
        state = torch.load(args.resume, mmap=True, weights_only=True, map_location="cpu")
        net.load_state_dict(state)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(args.steps):
        x = torch.randint(0, 1024, (32, 64), device=device)
        loss = net(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    state = gather_full(net)
    if torch.distributed.get_rank() == 0:
        torch.save(state, "model.pt")
    torch.distributed.destroy_process_group()
