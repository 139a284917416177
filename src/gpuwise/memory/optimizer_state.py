"""Optimizer state and the temporaries its step allocates.

- AdamW keeps two moments per parameter in the parameter's dtype (torch) or fp32 (master-weight
  frameworks). The ``foreach`` implementation — torch's default on CUDA — computes
  ``sqrt(v)`` for the whole parameter group into a new tensor list before ``addcdiv_``: one
  extra parameter-sized tensor at the step (torch/optim/adamw.py ``_multi_tensor_adamw``;
  14.96 GiB for Llama-3-8B bf16 in gpuwise's traced simulation of that step). ``fused`` does it
  in one kernel without the temporary.
- bitsandbytes 8-bit Adam: two 1-byte moments (+ negligible block absmax, block 2048). The
  ``paged`` variants live in CUDA unified memory, which ``torch.cuda.max_memory_allocated``
  does not count but nvidia-smi does once pages are resident.
- Adafactor (HF, ``beta1=None``): factored second moment, one row and one column vector per
  matrix; its per-parameter step builds ~3 fp32 temporaries of the parameter's size.
- SGD with momentum: one buffer.
"""

from __future__ import annotations

from gpuwise.workload.spec import Optimizer

__all__ = ["ADAM_LIKE", "is_paged", "state_bytes_per_param", "step_temporary_bytes"]


ADAM_LIKE: frozenset[Optimizer] = frozenset({"adamw", "adamw-fused"})


def state_bytes_per_param(optimizer: Optimizer, state_dtype_bytes: float, hidden_size: int = 4096) -> float:
    """Optimizer state bytes per trainable parameter."""
    if optimizer in ADAM_LIKE:
        return 2 * state_dtype_bytes
    if optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return 2.0
    if optimizer == "adafactor":
        # One fp32 row + column vector per (h x h)-ish matrix: 2/h floats per parameter.
        return 4.0 * 2 / max(hidden_size, 1)
    if optimizer == "sgd":
        return state_dtype_bytes
    return 0.0


def is_paged(optimizer: Optimizer) -> bool:
    """A bitsandbytes paged optimizer: its state lives in CUDA unified memory, outside PyTorch's allocator."""
    return optimizer.startswith("paged-")


def step_temporary_bytes(
    optimizer: Optimizer, trainable_params: float, largest_param: float, state_dtype_bytes: float
) -> float:
    """Transient bytes the optimizer step allocates on top of params, grads and state."""
    if optimizer == "adamw":  # foreach: sqrt(exp_avg_sq) for the whole group
        return trainable_params * state_dtype_bytes
    if optimizer == "adafactor":
        return 3 * 4.0 * largest_param
    return 0.0
