"""The baseline's findings → the knob settings worth a trial (a bounded list, not a grid).

Each finding names its own fix (``input_bound`` its worker count and prefetch, ``no_mixed_precision``
TF32 and, opt-in, bf16 autocast); the tuner tries exactly those, plus the user's ``--knob`` values.
A loader that waits on I/O rather than computing (the training thread idle during its own batch
loads) also gets a trial with more workers than cores: sleeping workers need no core each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwise.diagnose import Evidence, Finding
from gpuwise.diagnose import thresholds as T
from gpuwise.tune.knobs import Knobs


@dataclass(frozen=True)
class Candidate:
    """One trial worth running: the knobs to set and the reason shown next to its result."""

    knobs: Knobs
    why: str
    finding_id: str | None = None  # the finding whose fix this is (None: the user's --knob, or the tuner's)

    def to_dict(self) -> dict[str, Any]:
        """The candidate as JSON-ready ``{"knobs", "why", "finding_id"}``."""
        return {"knobs": self.knobs, "why": self.why, "finding_id": self.finding_id}


def from_findings(
    findings: list[Finding], evidence: Evidence | None, on_gpu: bool, allow_numerics: bool
) -> list[Candidate]:
    """The baseline's findings → knob candidates, each citing the finding it would fix.

    ``input_bound`` (not already explained by ``loader_cpu_saturated``) gives the suggested DataLoader
    workers, and a second candidate with more workers than cores when the loader waits on I/O;
    ``pageable_copies`` gives ``pin_memory``; ``no_mixed_precision`` gives TF32 and, only with
    ``allow_numerics``, bf16 autocast. GPU-only knobs are proposed only when ``on_gpu``; cuDNN benchmark
    mode is always tried on a GPU. Returns an empty list when nothing applies.
    """
    out: list[Candidate] = []
    ids = {f.id for f in findings}
    for f in findings:
        if f.id == "input_bound" and "loader_cpu_saturated" not in ids:
            workers = f.metrics.get("suggested_num_workers")
            if not isinstance(workers, int) or workers <= 0 or f.metrics.get("input_source") != "dataloader":
                continue
            loader: Knobs = {"persistent_workers": True}
            prefetch = f.metrics.get("suggested_prefetch_factor")
            if isinstance(prefetch, int) and prefetch > 0:
                loader["prefetch_factor"] = prefetch
            if on_gpu:
                loader["pin_memory"] = True
            why = f"input_bound: {f.metrics.get('input_wait_pct', 0):.0f} % of a step waited for data"
            out.append(Candidate({"num_workers": workers, **loader}, why, f.id))
            if _waits_on_io(evidence):
                more = min(T.TUNE_MAX_IO_WORKERS, workers * T.TUNE_IO_WORKERS_X)
                if more > workers:
                    out.append(
                        Candidate(
                            {"num_workers": more, **loader},
                            why + "; the loader waits on I/O, so more workers than cores can overlap it",
                            f.id,
                        )
                    )
        elif f.id == "pageable_copies" and on_gpu:
            share = f.metrics.get("pageable_copy_pct", 0)
            out.append(
                Candidate(
                    {"pin_memory": True},
                    f"pageable_copies: {share:.0f} % of copies from pageable memory",
                    f.id,
                )
            )
        elif f.id == "no_mixed_precision" and on_gpu:
            out.append(
                Candidate({"tf32": True}, "no_mixed_precision: TF32 tensor cores for fp32 matmuls", f.id)
            )
            if allow_numerics:
                out.append(
                    Candidate(
                        {"autocast": "bf16", "tf32": True},
                        "no_mixed_precision: bf16 autocast (changes numerics), TF32 for the rest",
                        f.id,
                    )
                )
    if on_gpu:
        out.append(Candidate({"cudnn_benchmark": True}, "cuDNN picks the fastest convolution algorithm"))
    return out


def from_user(knob_values: list[tuple[str, list[Any]]]) -> list[Candidate]:
    """The user's ``--knob NAME=V1,V2`` values → one single-knob candidate per value."""
    return [Candidate({name: value}, "--knob") for name, values in knob_values for value in values]


def _waits_on_io(ev: Evidence | None) -> bool:
    """The training thread's CPU during its own batch loads (num_workers=0) says whether loading waits
    or computes; the same reading the input_bound rule uses to size the worker count."""
    return bool(
        ev is not None
        and ev.loader.loader_wait_cpu_pct is not None
        and ev.loader.loader_wait_cpu_pct < T.LOADER_IO_WAIT_THREAD_CPU_PCT
    )


__all__ = ["Candidate", "from_findings", "from_user"]
