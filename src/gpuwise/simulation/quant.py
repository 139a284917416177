"""Stand-ins for what bitsandbytes does on a GPU, since bitsandbytes cannot run here.

Quantized weights (nf4/int4/int8/fp8) and 8-bit optimizer state are *accounted analytically*: a
stand-in holds storages of exactly the sizes bitsandbytes allocates, and reproduces its memory
pattern (bitsandbytes autograd/_functions.py: dequantize one weight to the compute dtype, matmul,
drop it, re-dequantize in backward; what each matmul keeps on ``ctx``). The arithmetic itself is
not reproduced; under fake tensors there is none. int8 is approximated by the same dequantize
pattern (LLM.int8 quantizes the activations instead; its outlier split is data-dependent).

Sizes (bitsandbytes defaults, as loaded by transformers' BitsAndBytesConfig):
- 4-bit (nf4/fp4): two weights per byte + one fp32 absmax per 64-weight block; with double
  quantization the absmax become uint8 plus one fp32 per 256 of them (Dettmers et al., QLoRA,
  arXiv:2305.14314, section 3 "Double Quantization").
- int8 (LLM.int8, bitsandbytes Linear8bitLt): one int8 per weight + one fp32 scale per output row.
- fp8: one byte per weight + one fp32 scale per tensor.
- 8-bit Adam(W) (bitsandbytes optim/optimizer.py ``Optimizer2State.init_state``): two uint8 states
  per parameter + one fp32 absmax per 2048-element block each; tensors under 4096 elements keep two
  fp32 states. The update is one fused in-place kernel (no temporaries).
"""

from __future__ import annotations

import torch
from torch import nn

from gpuwise.workload.spec import Precision

__all__ = ["AdamW8bitStandIn", "QuantizedLinear", "quantize_linears", "quantized_storage_bytes"]


_BLOCK_4BIT = 64
_BLOCK_DOUBLE_QUANT = 256
_BLOCK_8BIT_OPTIM = 2048
_MIN_8BIT_OPTIM_NUMEL = 4096


def quantized_storage_bytes(
    numel: int, out_features: int, precision: Precision, double_quant: bool
) -> dict[str, int]:
    """Bytes per storage a quantized weight of ``numel`` elements occupies (before allocator rounding)."""
    if precision in ("nf4", "int4"):
        blocks = -(-numel // _BLOCK_4BIT)
        sizes = {"weight": -(-numel // 2)}
        if double_quant:
            sizes["absmax"] = blocks  # uint8
            sizes["nested_absmax"] = 4 * -(-blocks // _BLOCK_DOUBLE_QUANT)
        else:
            sizes["absmax"] = 4 * blocks
        return sizes
    if precision == "int8":
        return {"weight": numel, "scale": 4 * out_features}
    if precision == "fp8":
        return {"weight": numel, "scale": 4}
    if precision == "fp4":  # memgaps: NVFP4, an FP8 E4M3 scale per 16 values + one fp32 per tensor
        return {"weight": -(-numel // 2), "block_scale": -(-numel // 16), "scale": 4}
    raise ValueError(f"not a quantized precision: {precision}")


class _DequantMatmul(torch.autograd.Function):
    """y = x @ dequant(W).T + b the way bitsandbytes' autograd functions do it: the dequantized weight
    is dropped after the matmul and rebuilt in backward. ``MatMul4Bit`` keeps only the packed weight on
    ``ctx`` (``ctx.tensors = (None, B)``); ``MatMul8bitLt`` keeps its 16-bit input and the int8
    transposed copy of it (``ctx.tensors = (CAt, subA, A)``), outside autograd's saved tensors, so
    activation checkpointing does not drop them."""

    @staticmethod
    def forward(ctx, x, layer, bias):
        ctx.layer = layer
        out = torch.nn.functional.linear(x, layer.dequantize(x.dtype), bias)
        if layer.precision == "int8" and ctx.needs_input_grad[0]:
            ctx.tensors = (torch.empty(x.shape, dtype=torch.int8, device=x.device), x)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        grad_x = grad_out @ ctx.layer.dequantize(grad_out.dtype) if ctx.needs_input_grad[0] else None
        return grad_x, None, None


class QuantizedLinear(nn.Module):
    """A frozen linear layer stored like bitsandbytes stores it; computes in ``compute_dtype``."""

    def __init__(
        self, linear: nn.Linear, precision: Precision, double_quant: bool, compute_dtype: torch.dtype
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.precision, self.compute_dtype = precision, compute_dtype
        numel = self.in_features * self.out_features
        sizes = quantized_storage_bytes(numel, self.out_features, precision, double_quant)
        device = linear.weight.device
        self.weight = nn.Parameter(
            torch.empty(sizes.pop("weight"), dtype=torch.uint8, device=device), requires_grad=False
        )
        for name, nbytes in sizes.items():
            self.register_buffer(name, torch.empty(nbytes, dtype=torch.uint8, device=device))
        self.bias = None
        if linear.bias is not None:
            self.bias = nn.Parameter(
                torch.empty(self.out_features, dtype=compute_dtype, device=device), requires_grad=False
            )

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """A new (out, in) weight in ``dtype``, as bitsandbytes' dequantize kernel returns it (shape and
        bytes only)."""
        # A new (out, in) tensor in the compute dtype, as bitsandbytes' dequantize kernel returns.
        return torch.empty(self.out_features, self.in_features, dtype=dtype, device=self.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """bitsandbytes Linear4bit.forward: cast to the compute dtype, dequantize, matmul, cast back to the
        input dtype."""
        input_dtype = x.dtype
        bias = None if self.bias is None else self.bias.to(self.compute_dtype)
        return _DequantMatmul.apply(x.to(self.compute_dtype), self, bias).to(input_dtype)

    def extra_repr(self) -> str:
        """The module's shape and precision in ``repr``."""
        return f"in_features={self.in_features}, out_features={self.out_features}, precision={self.precision}"


def quantize_linears(
    model: nn.Module, precision: Precision, double_quant: bool, compute_dtype: torch.dtype, skip: set[int]
) -> int:
    """Replace every plain ``nn.Linear`` (not LoRA adapters, not ``skip``) by a QuantizedLinear;
    returns the count."""
    replaced = 0
    for parent_name, parent in list(model.named_modules()):
        if "lora_" in parent_name:  # peft adapters (lora_A.default, lora_B.default) stay trainable
            continue
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and id(child) not in skip and not name.startswith("lora_"):
                setattr(parent, name, QuantizedLinear(child, precision, double_quant, compute_dtype))
                replaced += 1
    return replaced


class AdamW8bitStandIn(torch.optim.Optimizer):
    """bitsandbytes AdamW8bit's state layout; ``paged`` state lives in CUDA unified memory instead.

    ``fp32_state_params`` get 32-bit state, as the Hugging Face Trainer asks bitsandbytes to do for
    embedding weights (trainer.py: ``register_module_override(module, "weight", {"optim_bits": 32})``).
    """

    def __init__(
        self, params, fp32_state_params: set[int] | None = None, paged: bool = False, lr: float = 1e-3
    ):
        super().__init__(params, {"lr": lr})
        self.fp32_state_params = fp32_state_params or set()
        self.paged = paged

    @torch.no_grad()
    def step(self, closure=None):  # torch.optim.Optimizer.step signature; no loss to re-evaluate
        """One AdamW step with 8-bit moments and their block scales: allocates the state bitsandbytes would
        on the first step."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(self._init_state(p))
                # The fused bitsandbytes update writes p and the states in place: nothing to allocate.
        return None

    def _init_state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        n = p.numel()
        if n < _MIN_8BIT_OPTIM_NUMEL or id(p) in self.fp32_state_params:
            return {
                "state1": torch.zeros(n, dtype=torch.float32, device=p.device),
                "state2": torch.zeros(n, dtype=torch.float32, device=p.device),
            }
        blocks = -(-n // _BLOCK_8BIT_OPTIM)
        return {
            "state1": torch.zeros(n, dtype=torch.uint8, device=p.device),
            "state2": torch.zeros(n, dtype=torch.uint8, device=p.device),
            "absmax1": torch.zeros(blocks, dtype=torch.float32, device=p.device),
            "absmax2": torch.zeros(blocks, dtype=torch.float32, device=p.device),
        }
