# Pattern of llm.c's train_gpt2.py reference run: one batch drawn before the loop and overfit, each
# iteration timed with synchronize() (a measurement, quiet); the checkpoint loaded without weights_only.
import argparse
import time

import torch
from model import GPT


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_iterations", type=int, default=10)
    parser.add_argument("--init", default="")
    args = parser.parse_args()
    model = GPT.from_pretrained("gpt2").to("cuda")
    if args.init:
        model.load_state_dict(torch.load(args.init))  # expect[torch_load_unsafe]
    tokens = torch.randint(50257, (8 * 1024 + 1,), device="cuda")
    batches = iter([(tokens[:-1].view(8, 1024), tokens[1:].view(8, 1024))])
    x, y = next(batches)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    timings = []
    for i in range(args.num_iterations):
        t0 = time.time()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        timings.append(time.time() - t0)
        print(f"iteration {i}, loss: {loss.item():.4f}, time: {timings[-1] * 1000:.1f}ms")


if __name__ == "__main__":
    main()
