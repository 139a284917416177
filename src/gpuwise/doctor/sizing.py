"""Size the doctor's reference workload to the machine it runs on, at the load it has right now.

The point the doctor makes is that overlapping data loading with compute removes the wait. How much
that gains depends on the ratio of loading time W to compute time C per batch: the naive loop pays
W + C, a loop fed by k workers max(W / k, C). A fixed storage latency makes that ratio a property
of the machine (on a 2-core box whose cores other processes already used, C grew ~10x and the
fix gained 1.03x). So the doctor first times the model's step (C) and the decode + augment of a
batch (its CPU part of W) on this machine, then sets the storage latency so that W = LOAD_TO_COMPUTE
x C. With W = 4 C and the two workers a 2-core machine gets, the fix gains (4 + 1) / 2 = 2.5x. The
workers' decoding competes with the model for the cores in the fixed run only (measured here at a
load of 5-10: its compute slowed 1.8x and, with W = 3 C, the gain fell to 1.96x); the gain stays
>= 2x as long as that slowdown f stays <= 2.5: (4 + 1) / max(2, f) >= 2. The sleep part of W costs no
CPU, so a larger W / C also leaves a smaller share of the loading to compete.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from gpuwise.doctor.workload import ReferenceImages, WorkloadSettings, build_model

LOAD_TO_COMPUTE = 4.0  # W / C of the naive loop (see above)
TIMED_BATCHES = 5  # batches timed for each of C and W (after one untimed batch)


@dataclass(frozen=True)
class Sizing:
    """The timings the storage latency was sized from: the median compute time C (s per batch), the median
    decode + augment time (s per batch, the CPU part of W), and the chosen storage latency (s per sample).
    """

    compute_s: float  # C: forward + backward + SGD of one batch, median
    decode_s: float  # CPU part of W: decode + augment of one batch, median
    storage_latency_s: float  # per sample, chosen so that W = LOAD_TO_COMPUTE x C

    def to_dict(self) -> dict[str, float]:
        """The sizing as JSON, with the units in the keys and the ``LOAD_TO_COMPUTE`` ratio it aimed for."""
        return {
            "compute_s_per_batch": self.compute_s,
            "decode_s_per_batch": self.decode_s,
            "storage_latency_s_per_sample": self.storage_latency_s,
            "load_to_compute": LOAD_TO_COMPUTE,
        }


def size_workload(settings: WorkloadSettings, device: str) -> Sizing:
    """Time C and the decode part of W here and now; the latency fills W up to LOAD_TO_COMPUTE x C."""
    import torch

    previous_threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(settings.compute_threads)
    try:
        decode_s, batch = _decode_time(settings)
        compute_s = _compute_time(batch, device)
    finally:
        torch.set_num_threads(previous_threads)
    missing = max(0.0, LOAD_TO_COMPUTE * compute_s - decode_s)
    return Sizing(compute_s, decode_s, missing / settings.batch_size)


def _decode_time(settings: WorkloadSettings):
    import torch

    data = ReferenceImages(settings.batch_size * (TIMED_BATCHES + 1), 0.0, settings.seed)
    times, batch = [], None
    for b in range(TIMED_BATCHES + 1):
        t0 = time.perf_counter()
        samples = [data[b * settings.batch_size + i] for i in range(settings.batch_size)]
        batch = (torch.stack([s[0] for s in samples]), torch.tensor([s[1] for s in samples]))
        if b:
            times.append(time.perf_counter() - t0)
    assert batch is not None
    return statistics.median(times), batch


def _compute_time(batch, device: str) -> float:
    import torch

    torch.manual_seed(0)
    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images, labels = (t.to(device) for t in batch)
    times = []
    for b in range(TIMED_BATCHES + 1):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if b:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


__all__ = ["LOAD_TO_COMPUTE", "Sizing", "size_workload"]
