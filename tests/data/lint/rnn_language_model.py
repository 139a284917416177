# Pattern of pytorch/examples word_language_model/main.py (older version): manual SGD update (no
# optimizer.step), a --cuda flag, the best model pickled whole and loaded back with torch.load.
import math

import torch
import torch.nn as nn


def train_epoch(model, data, bptt, lr, log_every):
    criterion = nn.CrossEntropyLoss()
    model.train()
    total = 0.0
    hidden = model.init_hidden(data.size(1))
    for batch, i in enumerate(range(0, data.size(0) - 1, bptt)):
        inputs, targets = data[i : i + bptt], data[i + 1 : i + 1 + bptt].reshape(-1)
        hidden = tuple(h.detach() for h in hidden)
        model.zero_grad()
        output, hidden = model(inputs, hidden)
        loss = criterion(output.view(-1, output.size(-1)), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total += loss.detach()
        if batch % log_every == 0 and batch > 0:
            print(f"batch {batch} ppl {math.exp(total.item() / log_every):.2f}")
            total = 0.0


def run(args, model, data):
    if args.cuda:
        model.cuda()
        data = data.cuda()
    for _epoch in range(args.epochs):
        train_epoch(model, data, args.bptt, args.lr, args.log_every)
        with open(args.save, "wb") as f:
            torch.save(model, f)
    with open(args.save, "rb") as f:
        return torch.load(f)
