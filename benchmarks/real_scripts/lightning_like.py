"""A LightningModule with a LightningDataModule, trained by ``lightning.Trainer`` on CPU (the
Lightning docs' image-classifier shape), when lightning is installed; otherwise a plain-torch
look-alike of Lightning's loop (``optimizer.step(closure)`` running training_step and backward, the
batch fetched by the loop). The dataset does per-sample CPU work, as decoding and augmentation do.

Injection: --sample-cost K (K passes of CPU work per sample). Fix: --num-workers N (the DataModule's
DataLoader workers).
"""

import argparse
import json
import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--num-workers", type=int, default=0)
parser.add_argument("--sample-cost", type=int, default=0)
parser.add_argument("--plain", action="store_true", help="the plain-torch look-alike even with lightning")
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)
BATCH = 16

try:
    if args.plain:
        raise ImportError
    import lightning as L
except ImportError:
    L = None


class Samples(Dataset):
    def __init__(self, n, cost):
        self.n, self.cost = n, cost

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(32, 32, generator=g)
        for _ in range(self.cost):  # decoding/augmentation: CPU work per sample
            x = torch.tanh(x @ x.T / 32)
        return x.flatten()[:128], i % 10


def make_loader():
    return DataLoader(
        Samples(BATCH * args.steps, args.sample_cost),
        batch_size=BATCH,
        shuffle=True,
        num_workers=args.num_workers,
        persistent_workers=args.num_workers > 0,
    )


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


times: list[float] = []
_clock = [time.perf_counter()]


def tick():
    now = time.perf_counter()
    times.append(now - _clock[0])
    _clock[0] = now


if L is not None:

    class LitClassifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = Classifier()

        def forward(self, x):
            return self.model(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.cross_entropy(self(x), y)
            self.log("train_loss", loss)
            return loss

        def on_train_batch_end(self, outputs, batch, batch_idx):
            tick()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    class DataModule(L.LightningDataModule):
        def train_dataloader(self):
            return make_loader()

    trainer = L.Trainer(
        max_steps=args.steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(LitClassifier(), datamodule=DataModule())
else:
    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for x, y in make_loader():

        def closure(x=x, y=y):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss

        optimizer.step(closure)
        tick()
warm = times[3:] or times
summary = {"step_s_p50": statistics.median(warm), "step_s_mean": statistics.fmean(warm), "steps": len(times)}
print("RESULT " + json.dumps(summary))
