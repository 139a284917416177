"""What `gpuwise memory` answers, as one typed result: the estimate plus the optional questions.

The command used to build these answers as dicts with their display text inside; here they are data
(the JSON of ``--json`` is `MemoryReport.to_dict()`) and `gpuwise.report.memory_view` words them.
The serving figures come from `gpuwise.serving` (a higher layer), so the caller computes them and
hands them in: this module only holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuwise.catalog import get_model
from gpuwise.memory import MemoryEstimate, max_batch_that_fits, max_seq_len_that_fits
from gpuwise.workload import Workload

if TYPE_CHECKING:
    from gpuwise.serving.summary import ServingFigures

__all__ = ["MaxBatch", "MaxSeqLen", "MemoryReport", "memory_report"]


@dataclass(frozen=True)
class MaxBatch:
    """The largest batch that keeps ``headroom_pct`` of the GPU's memory free (``value`` 0: not even 1)."""

    value: int
    headroom_pct: float
    gpu: str

    def to_dict(self) -> dict[str, Any]:
        """The ``max_batch`` object of the memory JSON."""
        return {"value": self.value, "headroom_pct": self.headroom_pct, "gpu": self.gpu}


@dataclass(frozen=True)
class MaxSeqLen:
    """The longest sequence (training) or prompt (inference) in tokens that keeps ``headroom_pct`` free.

    ``capped_by_context``: the answer is the model's own context length (minus the generated tokens of
    an inference workload), not a memory limit; ``context_tokens`` is that length (None if unknown).
    """

    value: int
    headroom_pct: float
    gpu: str
    capped_by_context: bool
    context_tokens: int | None
    inference: bool

    def to_dict(self) -> dict[str, Any]:
        """The ``max_seq_len`` object of the memory JSON."""
        return {
            "value": self.value,
            "headroom_pct": self.headroom_pct,
            "gpu": self.gpu,
            "capped_by_context": self.capped_by_context,
        }


@dataclass(frozen=True)
class MemoryReport:
    """The estimate and the answers asked for with it; ``to_dict`` is the ``memory`` JSON document."""

    estimate: MemoryEstimate
    max_batch: MaxBatch | None = None
    max_seq_len: MaxSeqLen | None = None
    serving: ServingFigures | None = None

    def to_dict(self) -> dict[str, Any]:
        """The estimate's keys, then ``max_batch``, ``max_seq_len`` and ``serving`` when present."""
        out = self.estimate.to_dict()
        if self.max_batch is not None:
            out["max_batch"] = self.max_batch.to_dict()
        if self.max_seq_len is not None:
            out["max_seq_len"] = self.max_seq_len.to_dict()
        if self.serving is not None:
            out["serving"] = self.serving.to_dict()
        return out


def _max_seq_len(workload: Workload, estimate: MemoryEstimate, headroom_pct: float) -> MaxSeqLen:
    n = max_seq_len_that_fits(workload, estimate.gpu, headroom_pct=headroom_pct)
    context = get_model(workload.model).max_position_embeddings
    generated = workload.output_len if workload.is_inference else 0
    capped = bool(n and context and n >= context - generated)
    return MaxSeqLen(n, headroom_pct, estimate.gpu.id, capped, context, workload.is_inference)


def memory_report(
    workload: Workload,
    estimate: MemoryEstimate,
    *,
    max_batch: bool = False,
    max_seq: bool = False,
    headroom_pct: float = 10.0,
    serving: ServingFigures | None = None,
) -> MemoryReport:
    """``estimate`` (of ``workload``) with the largest batch and/or longest sequence that keep
    ``headroom_pct`` percent of the GPU free (bisection, `gpuwise.memory.fit`), and ``serving``."""
    batch = None
    if max_batch:
        n = max_batch_that_fits(workload, estimate.gpu, headroom_pct=headroom_pct)
        batch = MaxBatch(n, headroom_pct, estimate.gpu.id)
    length = _max_seq_len(workload, estimate, headroom_pct) if max_seq else None
    return MemoryReport(estimate, batch, length, serving)
