# Pattern of nanochat's scripts/chat_rl.py: each step samples completions from the model (a generator
# defined in the file, token by token), scores them and takes a policy-gradient step; the losses are
# logged with .item() on every pass, which costs nothing next to decoding (a host read per token).
import argparse
import itertools

import torch
from policy import build


@torch.no_grad()
def rollouts(engine, tasks, samples, device):
    for index in itertools.cycle(range(len(tasks))):
        prompt = tasks.render(index)
        sequences = engine.generate_batch(prompt, num_samples=samples, max_tokens=256)
        rewards = torch.tensor([tasks.reward(index, s) for s in sequences], device=device)
        ids = torch.tensor(tasks.pad(sequences), dtype=torch.long, device=device)
        yield ids[:, :-1], ids[:, 1:], rewards - rewards.mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--resume", default="")
    args = parser.parse_args()
    device = "cuda"
    model, engine, tasks = build(device)
    if args.resume:
        model.load_state_dict(torch.load(args.resume))  # expect[torch_load_unsafe]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    batches = rollouts(engine, tasks, 16, device)
    for step in range(args.steps):
        inputs, targets, advantages = next(batches)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logp = -model(inputs, targets, loss_reduction="none").view_as(inputs)
        loss = -(logp * advantages.unsqueeze(-1)).mean()
        loss.backward()
        print(f"step {step} loss {loss.item():.5f} reward {advantages.abs().mean().item():.3f}")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
