"""An LSTM language model trained with manual SGD and truncated BPTT: no torch.optim optimizer, so
a step has no optimizer.step() to end it (the shape of pytorch/examples' word_language_model).

Each step also scores a held-out batch for the log. --leak injects the classic leak: that score is
summed as a tensor (``total_val = total_val + val_loss``) outside ``torch.no_grad()``, so every
step's graph, with the activations it saved, stays alive; --no-leak is the fix (``val_loss.item()``).
"""

import argparse
import json
import statistics
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--leak", action=argparse.BooleanOptionalAction, default=False)
parser.add_argument("--lr", type=float, default=5.0)
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(1111)
VOCAB, BPTT, BATCH, HIDDEN = 1000, 20, 20, 128


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(VOCAB, HIDDEN)
        self.rnn = nn.LSTM(HIDDEN, HIDDEN, 2)
        self.decoder = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.encoder(tokens), hidden)
        return self.decoder(output).view(-1, VOCAB), hidden


def batchify(data, bsz):
    n = data.size(0) // bsz
    return data[: n * bsz].view(bsz, -1).t().contiguous()


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


corpus = torch.randint(0, VOCAB, (BATCH * BPTT * (args.steps + 2),))
train_data = batchify(corpus, BATCH)
model = RNNModel()
criterion = nn.NLLLoss()
hidden = (torch.zeros(2, BATCH, HIDDEN), torch.zeros(2, BATCH, HIDDEN))
val_data = batchify(torch.randint(0, VOCAB, (BATCH * (BPTT + 1),)), BATCH)
total_loss, total_val = 0.0, 0.0
times = []
for step, i in enumerate(range(0, train_data.size(0) - 1, BPTT)):
    if step == args.steps:
        break
    t0 = time.perf_counter()
    seq_len = min(BPTT, len(train_data) - 1 - i)
    data, targets = train_data[i : i + seq_len], train_data[i + 1 : i + 1 + seq_len].reshape(-1)
    hidden = repackage_hidden(hidden)
    model.zero_grad()
    output, hidden = model(data, hidden)
    loss = criterion(torch.log_softmax(output, dim=-1), targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-args.lr)
    total_loss += loss.item()
    val_out, _ = model(val_data[:-1], repackage_hidden(hidden))  # the monitoring forward, with grad
    val_loss = criterion(torch.log_softmax(val_out, dim=-1), val_data[1:].reshape(-1))
    total_val = total_val + val_loss if args.leak else total_val + val_loss.item()
    times.append(time.perf_counter() - t0)
print("RESULT " + json.dumps({"step_s_p50": statistics.median(times[3:] or times), "steps": len(times)}))
