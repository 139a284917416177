"""The largest batch on a target GPU this machine does not have: the traced simulator's answer.

On a CPU-only machine a trial never runs out of GPU memory, so the batch search cannot find the
target's limit by running. With ``--target-gpu`` and a workload that describes the model
(``--workload FILE``: a catalog model, a ``config.json`` or a Hugging Face ``model_factory``), each
batch value is simulated on fake tensors (``gpuwise.simulation``: the exact tensors of one training
step, the allocator's rounding and the CUDA overheads), ascending until one leaves less than
``TUNE_MEMORY_MARGIN_PCT`` of the target free. Batch trials above that are skipped, and the report
labels the figures "simulated".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.diagnose import thresholds as T


@dataclass(frozen=True)
class SimulatedBatch:
    """One batch value simulated on the target GPU: total and used device memory (bytes), free share (%)."""

    batch: int
    device_total_bytes: int
    device_memory_bytes: int
    headroom_pct: float

    @property
    def kept(self) -> bool:
        """True when the batch leaves at least ``TUNE_MEMORY_MARGIN_PCT`` of the device free."""
        return self.headroom_pct >= T.TUNE_MEMORY_MARGIN_PCT

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON, with ``kept`` and ``"method": "simulated"`` (not a measurement)."""
        return {**self.__dict__, "kept": self.kept, "method": "simulated"}


def simulate_batches(workload_file: Path, target_gpu: str, batches: list[int]) -> list[SimulatedBatch]:
    """Simulate each batch on ``target_gpu``, ascending, stopping at the first that is not kept.

    Raises ``GpuwiseError`` for an unknown GPU id before any simulation runs.
    """
    from gpuwise.catalog.gpus import get_gpu
    from gpuwise.simulation import traced_estimate
    from gpuwise.workload import load_workload

    gpu = get_gpu(target_gpu)  # an unknown id: one line with the closest names, before any work
    workload = load_workload(workload_file).with_changes(gpu=gpu.id)
    rows: list[SimulatedBatch] = []
    for batch in sorted(set(batches)):
        est = traced_estimate(
            workload.with_changes(batch_size=batch), model_factory=workload.model_factory or None
        )
        rows.append(SimulatedBatch(batch, est.device_total_bytes, est.device_memory_bytes, est.headroom_pct))
        if not rows[-1].kept:
            break  # memory grows with the batch: larger ones fit even less
    return rows


def largest_kept(rows: list[SimulatedBatch]) -> int | None:
    """The largest batch that kept the memory margin; None when none did."""
    kept = [r.batch for r in rows if r.kept]
    return max(kept) if kept else None


__all__ = ["SimulatedBatch", "largest_kept", "simulate_batches"]
