"""The linear layers of a transformer block by name, and LoRA adapter sizes.

Names follow Hugging Face/peft (``q_proj``…``down_proj``); short aliases (``q``, ``v``, ``mlp``,
``attn``, ``all-linear``) expand to them. Shapes are (in_features, out_features, copies per
layer) — MoE experts appear as copies of ``gate``/``up``/``down``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import ModelArch
from gpuwise.errors import GpuwiseError

__all__ = ["ATTENTION", "Linear", "block_linears", "hf_module", "lora_params", "mlp_names", "resolve_targets"]


ATTENTION = ("q", "k", "v", "o")
_ALIASES = {
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "o_proj": "o",
    "out_proj": "o",
    "output_proj": "o",
    "dense": "o",
    "query": "q",
    "key": "k",
    "value": "v",
    "wq": "q",
    "wk": "k",
    "wv": "v",
    "wo": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
    "w1": "gate",
    "w3": "up",
    "w2": "down",
    "fc1": "up",
    "fc2": "down",
    "fc_1": "gate",
    "fc_2": "up",
    "c_fc": "up",
    "c_proj": "down",
    "head": "lm_head",
    "output": "lm_head",
}


@dataclass(frozen=True)
class Linear:
    """One weight matrix of a transformer block: its Hugging Face-style name, input and output widths, and
    how many copies (MoE experts) exist."""

    name: str
    d_in: int
    d_out: int
    copies: int = 1  # experts (MoE) or 1

    @property
    def params(self) -> int:
        """Parameters of the matrix over all copies: d_in × d_out × copies."""
        return self.d_in * self.d_out * self.copies


def block_linears(arch: ModelArch) -> dict[str, Linear]:
    """The weight matrices of one transformer block (no biases, no norms)."""
    h, i = arch.hidden_size, arch.intermediate_size
    linears = {
        "q": Linear("q", h, arch.q_dim),
        "k": Linear("k", h, arch.kv_dim),
        "v": Linear("v", h, arch.kv_dim),
        "o": Linear("o", arch.q_dim, h),
    }
    experts = max(arch.num_experts, 1)
    if arch.gated_mlp:
        linears["gate"] = Linear("gate", h, i, experts)
    linears["up"] = Linear("up", h, i, experts)
    linears["down"] = Linear("down", i, h, experts)
    if arch.is_moe:
        linears["router"] = Linear("router", h, arch.num_experts)
    return linears


def mlp_names(arch: ModelArch) -> tuple[str, ...]:
    """The MLP's matrices: gate, up, down for SwiGLU/GeGLU; up, down otherwise."""
    return ("gate", "up", "down") if arch.gated_mlp else ("up", "down")


def resolve_targets(arch: ModelArch, targets: tuple[str, ...]) -> tuple[str, ...]:
    """Expand LoRA target names (``all-linear``, ``mlp``, ``q_proj`` …) to canonical block names."""
    names: list[str] = []
    for raw in targets:
        key = raw.strip().lower()
        key = _ALIASES.get(key, key)
        if key in ("all-linear", "all_linear", "all"):
            expanded: tuple[str, ...] = ATTENTION + mlp_names(arch)
        elif key in ("attn", "attention", "qkv", "query_key_value", "c_attn", "wqkv", "qkv_proj"):
            expanded = ATTENTION if key in ("attn", "attention") else ("q", "k", "v")
        elif key in ("mlp", "ffn", "feed_forward", "gate_up_proj"):
            expanded = mlp_names(arch) if key != "gate_up_proj" else ("gate", "up")
        elif key in ATTENTION or key in ("gate", "up", "down", "lm_head"):
            expanded = (key,) if not (key == "gate" and not arch.gated_mlp) else ()
        else:
            raise GpuwiseError(
                f"unknown LoRA target {raw!r}: use q, k, v, o, gate, up, down, mlp, attn, lm_head or "
                "all-linear (Hugging Face names like q_proj work too)"
            )
        names.extend(n for n in expanded if n not in names)
    return tuple(names)


def hf_module(arch: ModelArch, name: str) -> str:
    """The Hugging Face module a block linear lives in (``qkv`` for q/k/v of a fused-projection model)."""
    return arch.spec.hf_module(name)


def lora_params(arch: ModelArch, targets: tuple[str, ...], rank: int) -> int:
    """Trainable LoRA parameters: r × (d_in + d_out) per adapted matrix (A: r×d_in, B: d_out×r)."""
    names = resolve_targets(arch, targets)
    linears = block_linears(arch)
    per_layer = sum(
        rank * (linears[n].d_in + linears[n].d_out) * linears[n].copies for n in names if n in linears
    )
    total = per_layer * arch.num_layers
    if "lm_head" in names:
        total += rank * (arch.hidden_size + arch.vocab_size)
    return total
