# Pattern of karpathy/nanoGPT train.py with a self-casting model (see model.py): periodic logging, an
# unsafe resume, batches read from a memmap straight to the device.
import os

import numpy as np
import torch
import torch.nn.functional as F
from model import TinyLM

device = "cuda"
log_interval, eval_interval, max_iters, block, batch = 10, 250, 5000, 512, 16
data = np.memmap(os.path.join("data", "train.bin"), dtype=np.uint16, mode="r")


def get_batch():
    ix = torch.randint(len(data) - block - 1, (batch,))
    x = torch.stack([torch.from_numpy(data[i : i + block].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block].astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)


model = TinyLM()
model.init_weights()
model.to(device)
if os.path.exists("ckpt.pt"):
    checkpoint = torch.load("ckpt.pt", map_location=device)  # expect[torch_load_unsafe]
    model.load_state_dict(checkpoint["model"])
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
for iter_num in range(max_iters):
    x, y = get_batch()
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if iter_num % log_interval == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}")
    if iter_num % eval_interval == 0:
        torch.save({"model": model.state_dict(), "iter_num": iter_num}, "ckpt.pt")
