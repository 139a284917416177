"""Fixed and allocator overheads that no tensor accounts for.

Shared with the traced simulator (``gpuwise.simulation``) so analytic and traced totals
compare on the same terms:

- ``cuda_context_bytes``: what a process holds on the device before its first tensor — CUDA
  context, loaded kernel images, cuBLAS/cuDNN handles. With lazy module loading (CUDA ≥ 11.7,
  PyTorch ≥ 2.0's default ``CUDA_MODULE_LOADING=LAZY``) it is a few hundred MiB; the Hugging
  Face performance guide measured ~1,343 MiB on a V100 with eager loading (perf_train_gpu_one,
  transformers v4.21); optimum-benchmark's Llama-2-7B prefill shows 388 MB between NVML and
  max reserved.
- ``nccl_bytes``: NCCL communicator buffers outside the caching allocator on multi-GPU runs.
- ``allocator_reserve_bytes``: the caching allocator keeps freed blocks for reuse, so
  ``max_memory_reserved`` exceeds ``max_memory_allocated``. Tensors that live across steps
  (weights, optimizer state) and activations freed in reverse order of allocation reuse blocks
  well; what strands memory is the large *transient* working set of a step — the fp32 logits and
  loss gradients, the optimizer's temporaries, a recomputed block — whose freed blocks cannot
  serve the next requests at the peak. Published runs put the reserve at about 0.7× that
  transient working set (fms-acceleration a100_80gb.csv, NVML minus max allocated across eight
  single-GPU runs: 0.6–0.75× the logits/loss working set; optimum-benchmark inference: ~30 MB on
  a 27 MB prefill working set; Lightning ViT runs: reserved within 1 % of allocated).
  FSDP gets its own measured fraction, not a guess: in the eight 2-GPU FSDP runs of the same
  fms-acceleration table that publish both figures (nvidia_mem_reserved minus
  peak_torch_mem_alloc_in_bytes, minus context and NCCL), the reserve is 0.76–1.85× the transient
  working set, median 0.83 (leave-one-out medians 0.82–0.85): FSDP's all-gather buffers do not
  strand more than a single GPU's step does. (The 1.2 used before had no source.)
"""

from __future__ import annotations

from gpuwise.catalog import GPU
from gpuwise.units import MiB

__all__ = [
    "EAGER_CONTEXT_BYTES",
    "LAZY_CONTEXT_BYTES",
    "NCCL_BYTES",
    "RESERVE_FRACTION",
    "RESERVE_FRACTION_SHARDED",
    "allocator_reserve_bytes",
    "cuda_context_bytes",
    "device_total_bytes",
    "nccl_bytes",
]


LAZY_CONTEXT_BYTES = 400 * MiB
EAGER_CONTEXT_BYTES = 1343 * MiB
NCCL_BYTES = 384 * MiB
RESERVE_FRACTION = 0.70
RESERVE_FRACTION_SHARDED = 0.83  # measured: median of 8 FSDP runs (fms-acceleration a100_80gb.csv@f1895b7)


def cuda_context_bytes(gpu: GPU | None = None, lazy_loading: bool = True) -> float:
    """Device memory a CUDA process holds before allocating tensors."""
    return LAZY_CONTEXT_BYTES if lazy_loading else EAGER_CONTEXT_BYTES


def nccl_bytes(num_gpus: int) -> float:
    """NCCL buffers per rank (none on one GPU)."""
    return NCCL_BYTES if num_gpus > 1 else 0.0


def allocator_reserve_bytes(transient_bytes: float, sharded: bool = False) -> float:
    """Reserved-but-unallocated bytes at the peak, from the step's largest transient working set."""
    return max(transient_bytes, 0.0) * (RESERVE_FRACTION_SHARDED if sharded else RESERVE_FRACTION)


def device_total_bytes(
    reserved_bytes: float, num_gpus: int = 1, gpu: GPU | None = None, extra_bytes: float = 0.0
) -> float:
    """What nvidia-smi shows for the process: reserved + context (+ NCCL, unified-memory pages)."""
    return reserved_bytes + cuda_context_bytes(gpu) + nccl_bytes(num_gpus) + extra_bytes
