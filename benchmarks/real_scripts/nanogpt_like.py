"""A small GPT trained the way nanoGPT's train.py does it: batches cut from a ``np.memmap`` of
token ids by a ``get_batch`` function (no DataLoader), AdamW, optionally ``torch.compile``.

Injections: --data-sleep-ms (slow storage or tokenization inside get_batch), --item-per-step (a
``loss.item()`` every step: a host-device sync on CUDA), --keep-loss (``loss_history.append(loss)``:
each step's loss tensor kept, with its autograd node, after its graph's buffers are freed).
Fix: --prefetch (a thread prepares the next batch while the model runs). --compile prints Dynamo's
counters and how many times the forward was compiled in the RESULT line.
"""

import argparse
import atexit
import json
import os
import queue
import statistics
import tempfile
import threading
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--data-sleep-ms", type=float, default=0.0)
parser.add_argument("--prefetch", action="store_true")
parser.add_argument("--compile", action="store_true")
parser.add_argument("--compile-backend", default="aot_eager")
parser.add_argument("--item-per-step", action="store_true")
parser.add_argument("--keep-loss", action="store_true")
parser.add_argument("--device", default="cpu")
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(1337)
BLOCK, BATCH, VOCAB, EMBD, LAYERS, HEADS = 64, 8, 512, 64, 2, 4
data_path = os.path.join(tempfile.gettempdir(), "gpuwise-real-scripts-tokens.bin")
if not os.path.exists(data_path):
    np.random.default_rng(0).integers(0, VOCAB, 200_000, dtype=np.uint16).tofile(data_path)


def get_batch():
    data = np.memmap(data_path, dtype=np.uint16, mode="r")  # re-opened each batch, as nanoGPT does
    ix = torch.randint(len(data) - BLOCK, (BATCH,))
    x = torch.stack([torch.from_numpy(data[i : i + BLOCK].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + BLOCK].astype(np.int64)) for i in ix])
    if args.data_sleep_ms:
        time.sleep(args.data_sleep_ms / 1000)  # the injected slow read
    return x.to(args.device), y.to(args.device)


def prefetching(fetch, depth=2):
    """The fix, as gpuwise prescribes it: batches prepared on a thread, ahead of the step that needs them;
    the thread is stopped and joined at exit (a daemon thread still in a torch op when Python shuts down
    aborts the process)."""
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def fill():
        while not stop.is_set():
            batch = fetch()
            while not stop.is_set():
                try:
                    ready.put(batch, timeout=0.1)
                    break
                except queue.Full:
                    pass

    worker = threading.Thread(target=fill, daemon=True)
    worker.start()
    atexit.register(lambda: (stop.set(), worker.join()))
    return ready.get


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(EMBD), nn.LayerNorm(EMBD)
        self.attn, self.proj = nn.Linear(EMBD, 3 * EMBD), nn.Linear(EMBD, EMBD)
        self.mlp = nn.Sequential(nn.Linear(EMBD, 4 * EMBD), nn.GELU(), nn.Linear(4 * EMBD, EMBD))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(EMBD, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(BLOCK, EMBD)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f, self.lm_head = nn.LayerNorm(EMBD), nn.Linear(EMBD, VOCAB, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


model = GPT().to(args.device)
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
if args.compile:
    model = torch.compile(model, backend=args.compile_backend)
next_batch = prefetching(get_batch) if args.prefetch else get_batch
times, losses, loss_history = [], [], []
X, Y = next_batch()
for _ in range(args.steps):
    t0 = time.perf_counter()
    loss = model(X, Y)
    X, Y = next_batch()  # nanoGPT fetches the next batch while the device runs this one
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if args.item_per_step:
        losses.append(loss.item())
    if args.keep_loss:
        loss_history.append(loss)  # the tensor, not loss.item(): kept with its grad_fn
    times.append(time.perf_counter() - t0)
result = {"step_s_p50": statistics.median(times[3:] or times), "steps": len(times)}
if args.compile:
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo.utils import counters

    result["dynamo"] = {
        "graph_breaks": sum(counters["graph_break"].values()),
        "unique_graphs": counters["stats"]["unique_graphs"],
        # compilations of GPT.forward: 1, plus one per recompile (torch 2.13 keeps no "recompiles" counter)
        "forward_compilations": len(_debug_get_cache_entry_list(GPT.forward.__code__)),
    }
print("RESULT " + json.dumps(result))
