"""Traced memory simulation: run the real model on fake tensors for exact peaks and FLOPs.

Only this path imports torch, transformers and peft (``pip install 'gpuwise[sim]'``).
"""

from gpuwise.simulation.traced_estimate import traced_estimate
from gpuwise.simulation.types import GpuStepTime, TracedMemoryEstimate, TracedPhase

__all__ = ["GpuStepTime", "TracedMemoryEstimate", "TracedPhase", "traced_estimate"]
