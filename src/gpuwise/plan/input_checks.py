"""Inputs and results out of any sensible range, each said in one line instead of printed silently.

A typo (batch 1e12, a 32k sequence on an 8k model) still gets a plan: the searches are bounded, and
these lines say which number is off and why the figures built on it mean little.
"""

from __future__ import annotations

from gpuwise.catalog import get_model, list_gpus
from gpuwise.diagnose import thresholds as T
from gpuwise.errors import GpuwiseError
from gpuwise.plan.types import Outcome
from gpuwise.units import GiB
from gpuwise.workload import Workload

_DAY_S = 86_400.0
_NEXT_UNIT = 1024  # binary units: 1,024 GiB is a TiB


def fmt_bytes(n: float) -> str:
    """GiB up to a thousand, then TiB, PiB, EiB: '23,684 PiB' reads better than 25 trillion GiB."""
    value, unit = n / GiB, "GiB"
    for bigger in ("TiB", "PiB", "EiB"):
        if value < _NEXT_UNIT:
            break
        value, unit = value / _NEXT_UNIT, bigger
    return f"{value:,.1f} {unit}"


def context_warning(w: Workload) -> str | None:
    """A sequence longer than the model's trained context (RoPE scaling or another model is needed)."""
    try:
        arch = get_model(w.model)
    except GpuwiseError:
        return None
    context = arch.max_position_embeddings
    if w.is_cv or not context or not arch.is_transformer:
        return None
    length = w.seq_len + (w.output_len if w.is_inference else 0)
    if length <= context:
        return None
    what = "prompt + output" if w.is_inference else "seq_len"
    return (
        f"{what} {length:,} is beyond {w.model}'s context of {context:,} tokens: the model was not trained "
        "for it (it needs RoPE scaling or a long-context variant); memory and speed are extrapolated."
    )


def result_warnings(
    w: Workload, peak_bytes: float | None = None, run_time_s: float | None = None
) -> list[str]:
    """Results so far out of range that an input is almost surely wrong."""
    out = []
    largest = max(list_gpus(), key=lambda g: g.memory_gb)
    if peak_bytes is not None and peak_bytes > T.INPUT_ABSURD_MEMORY_X * largest.memory_gb * GiB:
        out.append(
            f"The job as given needs {fmt_bytes(peak_bytes)} per GPU, over "
            f"{peak_bytes / (largest.memory_gb * GiB):,.0f}× the largest catalog GPU ({largest.id}, "
            f"{largest.memory_gb:g} GB): check batch_size ({w.batch_size:,}) and seq_len ({w.seq_len:,})."
        )
    if run_time_s is not None and run_time_s > T.INPUT_ABSURD_RUN_DAYS * _DAY_S:
        out.append(
            f"The run as given takes {run_time_s / _DAY_S / 365:,.0f} years: check train_tokens "
            f"({w.train_tokens or 0:,.0f}), epochs ({w.epochs:g}) and the GPU count ({w.num_gpus})."
        )
    return out


def input_warnings(
    w: Workload, peak_bytes: float | None = None, run_time_s: float | None = None
) -> list[str]:
    """Every out-of-range warning for the workload as given and its predicted peak and run time."""
    return [*filter(None, [context_warning(w)]), *result_warnings(w, peak_bytes, run_time_s)]


def outcome_warnings(w: Workload, outcome: Outcome) -> list[str]:
    """Warnings about implausible inputs, judged with the predicted peak (bytes) and run time (s)."""
    return input_warnings(w, float(outcome.peak_bytes), outcome.run_time_s)


__all__ = ["context_warning", "fmt_bytes", "input_warnings", "outcome_warnings", "result_warnings"]
