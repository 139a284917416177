"""An image classifier trained the way torchvision's reference recipes do it: a Dataset whose
samples go through a transform, a DataLoader, a small CNN, SGD with momentum.

Injections: --transform-cost K (K blur passes per sample: a CPU-heavy augmentation), --io-wait-ms
(each sample waits on slow storage, as reading files from a network disk does). Fixes: --workers N
(DataLoader workers), --precompute (the transform applied once, before training: offline
pre-processing).
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
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--transform-cost", type=int, default=0)
parser.add_argument("--io-wait-ms", type=float, default=0.0)
parser.add_argument("--precompute", action="store_true")
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)
BATCH, SIZE = 16, 32
KERNEL = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16


def blur(img):
    """A separable 5-tap blur, one channel at a time: the kind of per-sample work augmentation does."""
    c = img.shape[0]
    img = F.conv2d(img[None], KERNEL.view(1, 1, 1, 5).expand(c, 1, 1, 5), padding=(0, 2), groups=c)
    return F.conv2d(img, KERNEL.view(1, 1, 5, 1).expand(c, 1, 5, 1), padding=(2, 0), groups=c)[0]


def transform(img, cost):
    img = img.float() / 255
    for _ in range(cost):
        img = blur(F.interpolate(img[None], scale_factor=2.0, mode="bilinear")[0])[:, ::2, ::2]
    if torch.rand(()) < 0.5:
        img = img.flip(-1)
    return (img - 0.5) / 0.25


class SyntheticImages(Dataset):
    def __init__(self, n, cost, io_wait_s):
        self.n, self.cost, self.io_wait_s = n, cost, io_wait_s
        self.cache = [self.load(i) for i in range(n)] if args.precompute else None

    def __len__(self):
        return self.n

    def load(self, i):
        g = torch.Generator().manual_seed(i)
        if self.io_wait_s:
            time.sleep(self.io_wait_s)  # the injected storage latency
        img = torch.randint(0, 256, (3, SIZE, SIZE), dtype=torch.uint8, generator=g)
        return transform(img, self.cost), i % 10

    def __getitem__(self, i):
        return self.cache[i] if self.cache is not None else self.load(i)


model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
)  # fmt: skip
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
dataset = SyntheticImages(BATCH * args.steps, args.transform_cost, args.io_wait_ms / 1000)
loader = DataLoader(
    dataset,
    batch_size=BATCH,
    shuffle=True,
    num_workers=args.workers,
    persistent_workers=args.workers > 0,
    prefetch_factor=4 if args.workers > 0 else None,
)
times = []
t0 = time.perf_counter()
for images, labels in loader:
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    now = time.perf_counter()
    times.append(now - t0)
    t0 = now
warm = times[3:] or times
summary = {"step_s_p50": statistics.median(warm), "step_s_mean": statistics.fmean(warm), "steps": len(times)}
print("RESULT " + json.dumps(summary))
