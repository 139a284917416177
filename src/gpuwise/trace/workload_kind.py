"""What a trace's work is: training (a backward or an optimizer step), inference, or unknown.

The rules give training advice (gradient accumulation, gradient checkpointing, a fused optimizer) only to
training (issue 25), so a trace says which it is. Autograd records every backward op (``autograd::engine::
evaluate_function: ...Backward0``, ``aten::..._backward``), optimizers their step (``Optimizer.step#AdamW.
step``), and backward kernels carry ``bwd``/``backward``/``dgrad``/``wgrad`` in their names: any of them is
training. A trace with host operators (``cpu_op``; ``Operator`` in older Kineto traces) and none of
them ran forward passes only: inference. A kernel-only trace (no host operators recorded) cannot tell:
unknown.
"""

from __future__ import annotations

import re

from gpuwise.diagnose.evidence import WorkloadKind
from gpuwise.trace.table import EventTable

__all__ = ["TRAINING_MARKER", "trace_workload_kind"]

# Names that only a training step records (host ops, optimizer annotations, backward kernels).
TRAINING_MARKER = re.compile(
    r"backward|autograd::engine|optimizer\.(step|zero_grad)|optimizer#|\bbwd\b|_bwd|bwd_|dgrad|wgrad",
    re.I,
)


def trace_workload_kind(t: EventTable) -> WorkloadKind:
    """Training when any event's name is a backward or optimizer marker, inference when host operators
    were recorded without one, else unknown (see the module docstring)."""
    if any(isinstance(name, str) and TRAINING_MARKER.search(name) for name in t.names):
        return "training"
    if {"cpu_op", "Operator"} & set(t.cats):  # Kineto writes "Operator" in older traces
        return "inference"
    return "unknown"
