"""An image classifier fed through torchvision-style transforms written as ``nn.Module``s (as
``torchvision.transforms.v2`` are): a Compose of a random resized crop, a flip, a colour jitter and a
normalisation, applied per sample in ``Dataset.__getitem__``. torchvision is not needed: the
transforms are plain torch modules doing the same kind of tensor work.

Injection: --transform-passes K (the jitter's blur repeated K times: heavier augmentation). Fix:
--workers N.
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
parser.add_argument("--transform-passes", type=int, default=1)
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)
BATCH, SIZE = 16, 32


class RandomResizedCrop(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, img):
        h, w = img.shape[-2:]
        ch, cw = int(h * (0.6 + 0.4 * torch.rand(()).item())), int(w * (0.6 + 0.4 * torch.rand(()).item()))
        top, left = torch.randint(0, h - ch + 1, ()).item(), torch.randint(0, w - cw + 1, ()).item()
        crop = img[..., top : top + ch, left : left + cw]
        return F.interpolate(crop[None], size=(self.size, self.size), mode="bilinear", align_corners=False)[0]


class RandomHorizontalFlip(nn.Module):
    def forward(self, img):
        return img.flip(-1) if torch.rand(()) < 0.5 else img


class GaussianBlurJitter(nn.Module):
    def __init__(self, passes):
        super().__init__()
        self.passes = passes
        self.register_buffer("kernel", torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16)

    def forward(self, img):
        c = img.shape[0]
        k = self.kernel
        for _ in range(self.passes):
            img = F.conv2d(img[None], k.view(1, 1, 1, 5).expand(c, 1, 1, 5), padding=(0, 2), groups=c)[0]
            img = F.conv2d(img[None], k.view(1, 1, 5, 1).expand(c, 1, 5, 1), padding=(2, 0), groups=c)[0]
        return img * (0.8 + 0.4 * torch.rand(()))


class Normalize(nn.Module):
    def forward(self, img):
        return (img - 0.5) / 0.25


class Images(Dataset):
    def __init__(self, n, transform):
        self.n, self.transform = n, transform

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, 64, 64), dtype=torch.uint8, generator=g).float() / 255  # "decode"
        return self.transform(img), i % 10


transform = nn.Sequential(
    RandomResizedCrop(SIZE), RandomHorizontalFlip(), GaussianBlurJitter(args.transform_passes), Normalize()
)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
)  # fmt: skip
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loader = DataLoader(
    Images(BATCH * args.steps, transform),
    batch_size=BATCH,
    shuffle=True,
    num_workers=args.workers,
    persistent_workers=args.workers > 0,
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
print("RESULT " + json.dumps({"step_s_p50": statistics.median(times[3:] or times), "steps": len(times)}))
