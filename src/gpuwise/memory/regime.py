"""Numeric regime: how many bytes each kind of tensor takes under a workload's precision.

One place turns ``precision`` (+ optimizer, framework) into byte sizes so every term agrees:
- ``fp32``: everything 4 bytes.
- ``amp-bf16`` / ``amp-fp16`` (torch autocast): fp32 parameters, gradients and optimizer state;
  matmuls run in 16-bit on per-forward 16-bit copies of the weights (autocast's weight cache,
  kept alive for backward); the residual stream stays fp32 because embeddings and norms run in
  fp32 under autocast.
- ``bf16`` / ``fp16`` ("pure"/"true" 16-bit, HF ``torch_dtype=bfloat16`` without AMP, Lightning
  ``bf16-true``): 2-byte parameters, gradients and — with torch optimizers — 2-byte optimizer
  state (torch keeps AdamW state in the parameter dtype). DeepSpeed/Megatron keep an fp32 master
  copy and fp32 state instead (``master_weights``).
- ``fp8``: inference weights 1 byte; training follows Transformer Engine/Megatron (bf16 weights,
  fp32 master + state, fp8 only inside matmuls).
- ``fp4`` (NVFP4/MXFP4 on FP4 tensor cores): inference weights block-scaled 4-bit (``weights.py``);
  training follows Transformer Engine's NVFP4 recipe like fp8 (bf16 weights, fp32 master + state).
- ``int8`` / ``int4`` / ``nf4``: frozen quantized weights (see ``weights.py``), 16-bit compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.workload import Workload

__all__ = ["MASTER_WEIGHT_FRAMEWORKS", "Regime", "regime_for"]


# Frameworks that keep fp32 master weights (and fp32 optimizer state) next to 16-bit parameters.
MASTER_WEIGHT_FRAMEWORKS = {"deepspeed", "megatron", "megatron-lm", "nemo", "colossalai"}


@dataclass(frozen=True)
class Regime:
    """Byte sizes per element for one workload."""

    param_bytes: float  # stored (non-quantized) parameter
    grad_bytes: float  # gradient of a trainable parameter
    compute_bytes: float  # matmul inputs/outputs (activations)
    residual_bytes: float  # residual stream / norm inputs
    master_bytes: float  # fp32 master copy per trainable parameter (0 if none)
    state_dtype_bytes: float  # dtype the optimizer keeps its moments in
    autocast_copy_bytes: float  # per linear weight, the 16-bit copy autocast caches (0 if no AMP)
    quantized: bool

    @property
    def is_amp(self) -> bool:
        """Mixed precision with fp32 master weights: autocast keeps 16-bit copies of the weights it casts."""
        return self.autocast_copy_bytes > 0


def regime_for(w: Workload) -> Regime:
    """The byte sizes implied by ``w.precision`` (and its framework for master weights)."""
    p = w.precision
    framework = (w.framework or "").lower()
    master = 0.0
    if p == "fp32":
        return Regime(4, 4, 4, 4, 0, 4, 0, False)
    if p in ("amp-bf16", "amp-fp16"):
        return Regime(4, 4, 2, 4, 0, 4, 2, False)
    if p in ("bf16", "fp16"):
        full_param_training = w.is_training and not w.is_lora
        if full_param_training and (
            framework in MASTER_WEIGHT_FRAMEWORKS or w.sharding in ("zero1", "zero2", "zero3")
        ):
            master = 4.0
        state = 4.0 if master else 2.0
        return Regime(2, 2, 2, 2, master, state, 0, False)
    if p in ("fp8", "fp4"):
        if w.is_training:
            # Transformer Engine: bf16 weights + fp32 master and state; fp8 casts are transient.
            return Regime(2, 2, 2, 2, 4 if not w.is_lora else 0, 4, 0, False)
        return Regime(1, 0, 2, 2, 0, 0, 0, False)
    # int8 / int4 / nf4: quantized frozen base, 16-bit compute.
    return Regime(2, 2, 2, 2, 0, 4, 0, True)
