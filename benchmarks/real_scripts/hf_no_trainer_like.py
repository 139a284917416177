"""Causal-LM fine-tuning the way Hugging Face's ``run_clm_no_trainer.py`` does it, on CPU, without
accelerate: the ``datasets``-style import pattern first (``importlib.util.find_spec("torch")`` and
``importlib.metadata`` before torch, then ``importlib.import_module("torch")``, as ``datasets`` and
``transformers`` do), a map-style dataset tokenized on the fly, ``default_data_collator``-style
collate, AdamW, a linear schedule with warm-up, gradient accumulation, ``completed_steps``.

Injection: --tokenize-cost K (K passes of CPU work per sample in ``__getitem__``: on-the-fly
tokenization and grouping). Fix: --dataloader_num_workers N (a DataLoader argument the script exposes).
"""

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import statistics
import time

# what `import datasets` / `import transformers` do before torch is ever imported
_torch_available = importlib.util.find_spec("torch") is not None
_torch_version = importlib.metadata.version("torch") if _torch_available else "N/A"
torch = importlib.import_module("torch")  # the lazy import, on first use
from torch.utils.data import DataLoader, Dataset  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)  # max_train_steps
parser.add_argument("--per_device_train_batch_size", type=int, default=8)
parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
parser.add_argument("--learning_rate", type=float, default=5e-4)
parser.add_argument("--num_warmup_steps", type=int, default=2)
parser.add_argument("--dataloader_num_workers", type=int, default=0)
parser.add_argument("--tokenize-cost", type=int, default=0)
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)
VOCAB, BLOCK = 512, 64


class TextDataset(Dataset):
    """Raw 'text' rows tokenized and grouped into blocks when read."""

    def __init__(self, n, cost):
        self.n, self.cost = n, cost

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        text = torch.randint(0, 65536, (BLOCK * 4,), generator=g)
        ids = text
        for _ in range(self.cost):  # the tokenizer's merges: integer work on every character
            ids = (ids * 31 + 7) % 65521
            ids = torch.sort(ids).values[torch.randperm(ids.numel(), generator=g)]
        ids = ids[: BLOCK + 1] % VOCAB
        return {"input_ids": ids[:-1], "labels": ids[1:]}


def default_data_collator(features):
    return {k: torch.stack([f[k] for f in features]) for k in features[0]}


class TinyCausalLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, 64)
        self.block = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
        self.lm_head = torch.nn.Linear(64, VOCAB)

    def forward(self, input_ids, labels=None):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(input_ids.shape[1])
        logits = self.lm_head(self.block(self.wte(input_ids), src_mask=mask, is_causal=True))
        loss = torch.nn.functional.cross_entropy(logits.view(-1, VOCAB), labels.view(-1))
        return {"loss": loss, "logits": logits}


model = TinyCausalLM()
total = args.steps * args.gradient_accumulation_steps * args.per_device_train_batch_size
train_dataloader = DataLoader(
    TextDataset(total, args.tokenize_cost),
    shuffle=True,
    collate_fn=default_data_collator,
    batch_size=args.per_device_train_batch_size,
    num_workers=args.dataloader_num_workers,
    persistent_workers=args.dataloader_num_workers > 0,
)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: min(1.0, (s + 1) / args.num_warmup_steps) * max(0.0, 1 - s / args.steps)
)
completed_steps, times = 0, []
t0 = time.perf_counter()
model.train()
for step, batch in enumerate(train_dataloader):
    outputs = model(**batch)
    loss = outputs["loss"] / args.gradient_accumulation_steps
    loss.backward()
    if (step + 1) % args.gradient_accumulation_steps == 0:
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        completed_steps += 1
        now = time.perf_counter()
        times.append(now - t0)
        t0 = now
    if completed_steps >= args.steps:
        break
warm = times[3:] or times
summary = {"step_s_p50": statistics.median(warm), "step_s_mean": statistics.fmean(warm), "steps": len(times)}
print("RESULT " + json.dumps(summary))
