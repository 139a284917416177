"""The doctor's reference training workload: a small image classifier fed like real ones are.

What one sample costs (the cost model, stated so the result can be judged):
- storage latency: ``storage_latency_s`` of waiting per sample, the time a read of one small file
  from a network filesystem or object store takes before its bytes arrive. The thread sleeps, as it
  would in ``read()``: the CPU is free meanwhile. ``gpuwise doctor`` sizes it to the machine first
  (``sizing.py``: loading a batch takes 4x computing it, as timed here and now); the 1.5 ms default
  is for callers that give their own settings.
- decode: the sample is stored deflate-compressed (what PNG uses) and really inflated with zlib;
- augment: a random resized crop (bilinear, 96→64 px), a random horizontal flip, normalization,
  all in numpy, as torchvision transforms would do on the CPU.

The "naive" settings are PyTorch's defaults: ``num_workers=0`` (load in the training thread),
no pinning, no prefetching. Everything else (model, data, seed, batch size, optimizer) stays the
same between the before and after runs, so the speed-up is the input pipeline's alone (plus
AMP/TF32 when the doctor runs on a GPU and the findings ask for it).
"""

from __future__ import annotations

import time
import zlib
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

import numpy as np

SOURCE_PX = 96
CROP_PX = 64
NUM_CLASSES = 10
DISTINCT_IMAGES = 64  # stored files; samples cycle through them (with their own random augmentation)


@dataclass(frozen=True)
class WorkloadSettings:
    """The reference workload's knobs; the defaults are PyTorch's (the naive loop the doctor starts from).

    ``storage_latency_s`` is the wait per sample in seconds; ``amp_dtype`` is ``"bfloat16"``/``"float16"``
    (CUDA only) or None for fp32; ``compute_threads`` is the model's intra-op threads on a CPU.
    """

    batch_size: int = 64
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    non_blocking: bool = False
    amp_dtype: str | None = None  # "bfloat16" | "float16" on CUDA
    tf32: bool = False
    storage_latency_s: float = 0.0015
    compute_threads: int = 1  # CPU only: the model's intra-op threads (see train())
    seed: int = 0

    def with_changes(self, **changes: Any) -> WorkloadSettings:
        """A copy with the given fields replaced."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON, one key per field."""
        return asdict(self)


def _make_images(seed: int) -> list[bytes]:
    """Natural-looking test images (smooth colour fields plus sensor noise), deflate-compressed."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SOURCE_PX, 0:SOURCE_PX].astype(np.float32)
    blobs = []
    for _ in range(DISTINCT_IMAGES):
        channels = []
        for _channel in range(3):
            fx, fy, phase = rng.uniform(2, 9), rng.uniform(2, 9), rng.uniform(0, 6.3)
            field = np.sin(xx / fx + phase) * np.cos(yy / fy) * 90 + 128 + rng.normal(0, 6, xx.shape)
            channels.append(field)
        img = np.clip(np.stack(channels), 0, 255).astype(np.uint8)
        blobs.append(zlib.compress(img.tobytes(), 6))
    return blobs


_MEAN = (np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255)[:, None, None]
_STD = (np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255)[:, None, None]


def _resized_crop(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random crop covering 50-100 % of the area, bilinear-resized to CROP_PX (torchvision's
    RandomResizedCrop, simplified)."""
    side = int(SOURCE_PX * np.sqrt(rng.uniform(0.5, 1.0)))
    y0, x0 = rng.integers(0, SOURCE_PX - side + 1, 2)
    pos = np.linspace(0, side - 1, CROP_PX, dtype=np.float32)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, side - 1)
    w = (pos - lo)[None, :]
    rows = (
        img[:, y0 + lo, :].astype(np.float32) * (1 - w.T)[None]
        + img[:, y0 + hi, :].astype(np.float32) * w.T[None]
    )
    cols = rows[:, :, x0 + lo] * (1 - w)[None] + rows[:, :, x0 + hi] * w[None]
    return cols


class ReferenceImages:
    """A map-style dataset: read (wait), inflate, augment. Deterministic per (seed, index)."""

    def __init__(self, length: int, storage_latency_s: float, seed: int = 0) -> None:
        self.length = length
        self.storage_latency_s = storage_latency_s
        self.seed = seed
        self.blobs = _make_images(seed)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        import torch

        if self.storage_latency_s > 0:
            time.sleep(self.storage_latency_s)  # the read: bytes arrive after the storage latency
        raw = zlib.decompress(self.blobs[index % DISTINCT_IMAGES])
        img = np.frombuffer(raw, dtype=np.uint8).reshape(3, SOURCE_PX, SOURCE_PX)
        rng = np.random.default_rng((self.seed, index))
        crop = _resized_crop(img, rng)
        if rng.random() < 0.5:
            crop = crop[:, :, ::-1]
        sample = (crop - _MEAN) / _STD
        return torch.from_numpy(np.ascontiguousarray(sample, dtype=np.float32)), index % NUM_CLASSES


def build_model():
    """A small CNN (~70 k parameters). Its compute is kept well under the naive input time, so the
    fixed pipeline stays ahead of the model even when neighbours slow the CPU down."""
    from torch import nn

    c = 24
    return nn.Sequential(
        nn.Conv2d(3, c, 3, stride=2, padding=1),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(2 * c),
        nn.ReLU(),
        nn.Conv2d(2 * c, 4 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(4 * c),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * c, NUM_CLASSES),
    )


def make_loader(settings: WorkloadSettings, num_batches: int):
    """A shuffled, seeded DataLoader over ``num_batches`` full batches of the reference images, built with the
    settings' loader options (``persistent_workers``/``prefetch_factor`` only with workers, as DataLoader
    requires).
    """
    import torch
    from torch.utils.data import DataLoader, Dataset

    dataset = ReferenceImages(num_batches * settings.batch_size, settings.storage_latency_s, settings.seed)
    generator = torch.Generator().manual_seed(settings.seed)
    kwargs: dict[str, Any] = {
        "batch_size": settings.batch_size,
        "shuffle": True,
        "generator": generator,
        "drop_last": True,
        "num_workers": settings.num_workers,
        "pin_memory": settings.pin_memory,
    }
    if settings.num_workers > 0:
        kwargs["persistent_workers"] = settings.persistent_workers
        if settings.prefetch_factor is not None:
            kwargs["prefetch_factor"] = settings.prefetch_factor
    # map-style (__len__ + __getitem__) is all DataLoader uses; the class stays importable without torch
    return DataLoader(cast("Dataset[Any]", dataset), **kwargs)


def train(settings: WorkloadSettings, steps: int, device: str) -> None:
    """Run ``steps`` optimizer steps (under ``gpuwise tune``, the profiler's --stop ends it first)."""
    import torch

    # On a CPU the model computes on `compute_threads` (1) thread, standing in for the accelerator while
    # the other cores are the host's, as on a GPU machine. Several intra-op threads on a small, shared
    # machine make step times swing several-fold with other load, which would drown the measurement.
    previous_threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(settings.compute_threads)
    try:
        _train(settings, steps, device)
    finally:
        torch.set_num_threads(previous_threads)


def _train(settings: WorkloadSettings, steps: int, device: str) -> None:
    import torch

    torch.manual_seed(settings.seed)
    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if device == "cuda" and settings.tf32:  # only on: the tuner's tf32 knob may have set it already
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    amp = getattr(torch, settings.amp_dtype) if settings.amp_dtype else None
    loader = make_loader(settings, steps + 2)
    non_blocking = settings.non_blocking or loader.pin_memory  # pinned by the tuner: copy asynchronously
    for done, (images, labels) in enumerate(loader, start=1):
        images = images.to(device, non_blocking=non_blocking)
        labels = labels.to(device, non_blocking=non_blocking)
        with torch.autocast(device_type=device, dtype=amp, enabled=amp is not None):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if done >= steps:
            break
    del loader  # shuts the workers down before the next run starts its own


__all__ = ["ReferenceImages", "WorkloadSettings", "build_model", "make_loader", "train"]
