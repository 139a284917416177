"""What a trace's work is: training (a backward or an optimizer step), inference, or unknown.

The rules give training advice (gradient accumulation, gradient checkpointing, a fused optimizer) only to
training (issue 25), so a trace says which it is. Autograd records every backward op (``autograd::engine::
evaluate_function: ...Backward0``, ``aten::..._backward``), optimizers their step (``Optimizer.step#AdamW.
step``), and backward kernels carry ``bwd``/``backward``/``dgrad``/``wgrad`` in their names: any of them is
training. A trace with host operators (``cpu_op``; ``Operator`` in older Kineto traces) and none of
them ran forward passes only: inference. A kernel-only trace (no host operators recorded) cannot tell:
unknown.

Inference engines leave their own marks (issue 26): kernels replayed from a CUDA/HIP graph
(``cudaGraphLaunch``/``hipGraphLaunch``) and the engines' decode-loop annotations (vLLM ``execute_model``,
SGLang ``forward_decode``/``forward_extend``) with no backward or optimizer on the host side are
inference, even when a kernel name carries ``bwd`` (attention libraries ship both directions).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from gpuwise.diagnose.evidence import WorkloadKind
from gpuwise.trace.table import EventTable

__all__ = ["HOST_TRAINING_MARKER", "INFERENCE_MARKER", "TRAINING_MARKER", "trace_workload_kind"]

# Names that only a training step records (host ops, optimizer annotations, backward kernels).
TRAINING_MARKER = re.compile(
    r"backward|autograd::engine|optimizer\.(step|zero_grad)|optimizer#|\bbwd\b|_bwd|bwd_|dgrad|wgrad",
    re.I,
)

# What only a training step's host side records: autograd's engine, backward ops, an optimizer step.
HOST_TRAINING_MARKER = re.compile(
    r"autograd::engine|Backward0|aten::\w+_backward|optimizer\.(step|zero_grad)|optimizer#", re.I
)
# Graph replay and the serving engines' decode loops (vLLM model runner, SGLang scheduler/model runner).
INFERENCE_MARKER = re.compile(
    r"^(cuda|hip|cu)GraphLaunch|execute_model|forward_decode|forward_extend|model_runner|"
    r"\bdecode_step\b|vllm|sglang",
    re.I,
)


def _memo(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    """``pattern`` found in a name, memoized per distinct name: a worker sees the same names in every rank
    of a job, and these case-blind alternations cost ~15 µs per name of ~130 characters (4 ms per DLRM
    rank for INFERENCE_MARKER alone)."""
    return lru_cache(maxsize=1 << 14)(lambda name: pattern.search(name) is not None)


_inference, _host_training, _training = map(_memo, (INFERENCE_MARKER, HOST_TRAINING_MARKER, TRAINING_MARKER))


def trace_workload_kind(t: EventTable) -> WorkloadKind:
    """Training when any event's name is a backward or optimizer marker, inference when host operators
    were recorded without one, else unknown (see the module docstring)."""
    names = [name for name in t.names if isinstance(name, str)]
    if any(map(_inference, names)) and not any(map(_host_training, names)):
        return "inference"
    if any(map(_training, names)):
        return "training"
    if {"cpu_op", "Operator"} & set(t.cats):  # Kineto writes "Operator" in older traces
        return "inference"
    return "unknown"
