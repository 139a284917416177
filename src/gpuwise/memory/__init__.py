"""Analytic GPU memory estimation (torch-free): what a workload needs per GPU, and what fits.

Public API (stable):
- ``estimate_memory(workload, gpu=None) -> MemoryEstimate``
- ``max_batch_that_fits(workload, gpu=None, headroom_pct=10) -> int``
- ``max_seq_len_that_fits(workload, gpu=None, headroom_pct=10) -> int``
- ``fit_table(workload, counts=(1, 2, 4, 8)) -> FitResult``
- overheads shared with the traced simulator: ``cuda_context_bytes``, ``nccl_bytes``,
  ``allocator_reserve_bytes``, ``device_total_bytes``
- per-term helpers: ``kv_cache_bytes``, ``lora_params``, ``weight_bytes``, ``quantized_bytes_per_param``

The traced (fake-tensor) simulator lives in ``gpuwise.simulation`` and imports torch; this
package does not.
"""

from gpuwise.memory.estimate import COMPONENTS, MemoryEstimate, Phase, estimate_memory, gpu_capacity_bytes
from gpuwise.memory.fit_table import FitResult, FitRow, fit_table, max_batch_that_fits, max_seq_len_that_fits
from gpuwise.memory.kv_cache import kv_cache_bytes
from gpuwise.memory.overheads import (
    allocator_reserve_bytes,
    cuda_context_bytes,
    device_total_bytes,
    nccl_bytes,
)
from gpuwise.memory.shapes import lora_params
from gpuwise.memory.weights import quantized_bytes_per_param, weight_bytes

__all__ = [
    "COMPONENTS",
    "FitResult",
    "FitRow",
    "MemoryEstimate",
    "Phase",
    "allocator_reserve_bytes",
    "cuda_context_bytes",
    "device_total_bytes",
    "estimate_memory",
    "fit_table",
    "gpu_capacity_bytes",
    "kv_cache_bytes",
    "lora_params",
    "max_batch_that_fits",
    "max_seq_len_that_fits",
    "nccl_bytes",
    "quantized_bytes_per_param",
    "weight_bytes",
]
