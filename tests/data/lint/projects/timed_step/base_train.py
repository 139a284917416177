# Pattern of karpathy/nanochat scripts/base_train.py: a module-level loop, the step timed with an aliased
# synchronize() before and after, the loss read with .item() between them: one wait per step, one finding.
import time

import torch
from nanochat_like import build_model, make_loader

device_type = "cuda" if torch.cuda.is_available() else "cpu"
synchronize = torch.cuda.synchronize if device_type == "cuda" else lambda: None
model = build_model().to(device_type)
model = torch.compile(model)
optimizer = model.setup_optimizer(lr=0.02)
grad_accum_steps = 4
train_loader = make_loader()
x, y = next(train_loader)
smooth = 0.0
for step in range(1000):
    synchronize()  # expect[cuda_sync_in_loop]
    t0 = time.time()
    for _micro in range(grad_accum_steps):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            loss = model(x, y)
        train_loss = loss.detach()
        (loss / grad_accum_steps).backward()
        x, y = next(train_loader)
    optimizer.step()
    model.zero_grad(set_to_none=True)
    train_loss_f = train_loss.item()
    synchronize()
    dt = time.time() - t0
    smooth = 0.9 * smooth + 0.1 * train_loss_f
    print(f"step {step:05d} | loss {smooth:.4f} | dt {dt * 1000:.1f} ms")
