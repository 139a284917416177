# Pattern of hand-written GPT fine-tuning loops (nanoGPT forks, llm.c's train_gpt2.py style): gradient
# accumulation by `(micro + 1) % accum`, GradScaler, and a grad-norm helper that reads one float per tensor.
import time

import numpy as np
import torch
from model import GPT

device = "cuda"
batch, block, accum, log_every = 8, 256, 4, 50
data = np.memmap("train.bin", dtype=np.uint16, mode="r")


def get_batch():
    ix = torch.randint(len(data) - block, (batch,))
    x = torch.stack([torch.from_numpy(data[i : i + block].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block].astype(np.int64)) for i in ix])
    return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)


def grad_norm(model):
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += p.grad.norm().item() ** 2  # expect[host_sync_per_step]
    return total**0.5


def main():
    model = GPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    scaler = torch.amp.GradScaler("cuda")
    running = torch.zeros((), device=device)
    t0 = time.time()
    for micro in range(100_000):
        x, y = get_batch()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            _, loss = model(x, y)
        scaler.scale(loss / accum).backward()
        running += loss.detach()
        if (micro + 1) % accum == 0:
            scaler.unscale_(optimizer)
            norm = grad_norm(model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            if micro % log_every == 0:
                elapsed = time.time() - t0
                print(f"step {micro}: loss {running.item() / log_every:.4f} norm {norm:.2f} {elapsed:.1f}s")
                running.zero_()


if __name__ == "__main__":
    main()
