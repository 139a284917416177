"""The optimizer a CUDA run would build, built explicitly so a CPU simulation does not pick CPU defaults.

The implementation moves the peak a lot (Llama-3-8B pure bf16, traced with this simulation: AdamW
foreach 75.3 GiB, fused 60.6, for-loop 62.3): ``torch.optim.AdamW(params)`` on CUDA tensors takes the
foreach path (torch/optim/optimizer.py ``_default_to_fused_or_foreach``), on CPU tensors the
for-loop. So every choice below names its implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from gpuwise.errors import GpuwiseError
from gpuwise.simulation.quant import AdamW8bitStandIn
from gpuwise.workload.spec import Optimizer

__all__ = ["OptimizerChoice", "build_optimizer", "state_tensors"]


@dataclass(frozen=True)
class OptimizerChoice:
    """The optimizer the simulated step runs, a description for the user, and whether its state is paged
    (outside PyTorch's allocator)."""

    optimizer: torch.optim.Optimizer
    description: str
    paged: bool = False  # state lives in CUDA unified memory, outside PyTorch's allocator


def build_optimizer(name: Optimizer, model: nn.Module) -> OptimizerChoice:
    """The workload's optimizer over the trainable parameters, as the real library builds it (foreach
    AdamW, bitsandbytes stand-ins…)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise GpuwiseError("the model has no trainable parameters, so there is no training step to simulate")
    if name == "adamw":
        return OptimizerChoice(
            torch.optim.AdamW(params, lr=1e-4, foreach=True),
            "torch.optim.AdamW, foreach implementation (the CUDA default)",
        )
    if name == "adamw-fused":
        return OptimizerChoice(
            torch.optim.AdamW(params, lr=1e-4, fused=True),
            "torch.optim.AdamW(fused=True) (the Hugging Face Trainer default with torch >= 2.8)",
        )
    if name == "sgd":
        return OptimizerChoice(
            torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=True),
            "torch.optim.SGD(momentum=0.9), foreach implementation",
        )
    if name == "adafactor":
        from transformers.optimization import Adafactor

        # What the Hugging Face Trainer builds for optim="adafactor" (trainer.py): fixed lr, no scaling.
        return OptimizerChoice(
            Adafactor(params, lr=1e-3, scale_parameter=False, relative_step=False),
            "transformers Adafactor (scale_parameter=False, relative_step=False), as the HF Trainer builds "
            "it",
        )
    if name in ("adamw-8bit", "paged-adamw-8bit"):
        paged = name.startswith("paged")
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        optimizer = AdamW8bitStandIn(params, fp32_state_params=embeddings, paged=paged)
        what = "bitsandbytes PagedAdamW8bit" if paged else "bitsandbytes AdamW8bit"
        return OptimizerChoice(
            optimizer,
            f"{what} (state sizes accounted analytically: bitsandbytes cannot run here; "
            "embedding weights keep 32-bit state, as the HF Trainer sets)",
            paged=paged,
        )
    raise GpuwiseError(
        f"optimizer {name!r} cannot be simulated; choose adamw, adamw-fused, adamw-8bit, paged-adamw-8bit, "
        "adafactor or sgd"
    )


def state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every state tensor the optimizer holds (moments, step counters): what its step allocates."""
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
