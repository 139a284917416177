"""FLOP counts for transformer training and inference, from the architecture's shapes.

Conventions (the same as PaLM appendix B and Megatron, except that attention is counted with
its causal mask, i.e. the work FlashAttention actually does):
- a matmul with P weights costs 2·P FLOPs per token forward; backward costs 2·P for the input
  gradient and 2·P for the weight gradient;
- attention scores and the weighted sum cost 2·2·context·q_dim per token and layer forward;
  causal masking halves the average context of a training/prefill sequence (s/2);
- the embedding lookup is free, the lm_head (tied or not) is a matmul;
- MoE layers count only the experts a token is routed to.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuwise.catalog import ModelArch
from gpuwise.workload.spec import Attention, Checkpointing

__all__ = [
    "TrainingFlops",
    "attention_bytes_per_token",
    "attention_flops_per_token",
    "block_linear_params",
    "elementwise_bytes_per_token",
    "lora_active_params",
    "lora_elementwise_bytes_per_token",
    "lora_params",
    "lora_targets",
    "matmul_params",
    "palm_flops_per_token",
    "training_flops",
]


# LoRA target names (peft spelling, several families) -> which projection they adapt.
_TARGET_ALIASES = {
    "q_proj": "q",
    "query": "q",
    "wq": "q",
    "k_proj": "k",
    "key": "k",
    "wk": "k",
    "v_proj": "v",
    "value": "v",
    "wv": "v",
    "o_proj": "o",
    "out_proj": "o",
    "dense": "o",
    "wo": "o",
    "gate_proj": "gate",
    "w1": "gate",
    "up_proj": "up",
    "fc1": "up",
    "c_fc": "up",
    "fc_in": "up",
    "dense_h_to_4h": "up",
    "w3": "up",
    "down_proj": "down",
    "fc2": "down",
    "c_proj": "down",
    "fc_out": "down",
    "dense_4h_to_h": "down",
    "w2": "down",
    "qkv_proj": "qkv",
    "query_key_value": "qkv",
    "c_attn": "qkv",
    "wqkv": "qkv",
}


def matmul_params(arch: ModelArch, active: bool = True) -> int:
    """Weights that take part in a matmul for every token (lm_head included, embedding lookup not).

    ``active`` counts only the routed experts of an MoE layer; ``False`` counts all of them.
    """
    counts = arch.param_counts()
    if not arch.is_transformer:
        return counts.total
    per_layer_mlp = counts.active_per_layer_mlp if active else counts.per_layer_mlp
    blocks = counts.num_layers * (counts.per_layer_attention + per_layer_mlp)
    lm_head = arch.vocab_size * arch.hidden_size if arch.is_decoder else 0
    return blocks + lm_head


def block_linear_params(arch: ModelArch) -> int:
    """Weights of the transformer blocks' linear layers (all experts): what weight quantization shrinks."""
    counts = arch.param_counts()
    if not arch.is_transformer:
        return counts.total
    return counts.num_layers * (counts.per_layer_attention + counts.per_layer_mlp)


def attention_flops_per_token(arch: ModelArch, context: float, causal: bool = True) -> float:
    """Forward attention FLOPs for one token (all layers).

    ``context`` is the sequence length for training/prefill (averaged over the causal mask when
    ``causal``), or the number of cached tokens attended to for a decode step (pass causal=False).
    """
    if not arch.is_transformer:
        return 0.0
    effective = context / 2 if causal else context
    return 4.0 * effective * arch.q_dim * arch.num_layers


def _projection_dims(arch: ModelArch) -> dict[str, tuple[int, int]]:
    h, i = arch.hidden_size, arch.intermediate_size
    dims = {
        "q": (h, arch.q_dim),
        "k": (h, arch.kv_dim),
        "v": (h, arch.kv_dim),
        "o": (arch.q_dim, h),
        "qkv": (h, arch.q_dim + 2 * arch.kv_dim),
        "up": (h, i),
        "down": (i, h),
    }
    if arch.gated_mlp:
        dims["gate"] = (h, i)
    return dims


def lora_targets(arch: ModelArch, targets: tuple[str, ...]) -> list[str]:
    """Projection keys adapted by LoRA ('all-linear' = every block projection)."""
    dims = _projection_dims(arch)
    if not targets or "all-linear" in targets or "all" in targets:
        return [k for k in ("q", "k", "v", "o", "gate", "up", "down") if k in dims]
    chosen = []
    for name in targets:
        key = _TARGET_ALIASES.get(name.strip().lower().rsplit(".", 1)[-1])
        if key and key in dims and key not in chosen:
            chosen.append(key)
    return chosen


def lora_params(arch: ModelArch, rank: int, targets: tuple[str, ...]) -> int:
    """Trainable adapter parameters: rank·(d_in + d_out) per adapted projection and layer.

    MoE expert projections get one adapter per expert (what peft does with all-linear).
    """
    if not arch.is_transformer:
        return 0
    dims = _projection_dims(arch)
    experts = max(arch.num_experts, 1)
    total = 0
    for key in lora_targets(arch, targets):
        d_in, d_out = dims[key]
        copies = experts if key in {"gate", "up", "down"} else 1
        total += copies * rank * (d_in + d_out)
    return total * arch.num_layers


def lora_active_params(arch: ModelArch, rank: int, targets: tuple[str, ...]) -> int:
    """Adapter parameters a token passes through (routed experts only)."""
    if not arch.is_moe:
        return lora_params(arch, rank, targets)
    dims = _projection_dims(arch)
    total = 0
    for key in lora_targets(arch, targets):
        d_in, d_out = dims[key]
        copies = (arch.experts_per_token or 1) if key in {"gate", "up", "down"} else 1
        total += copies * rank * (d_in + d_out)
    return total * arch.num_layers


def lora_elementwise_bytes_per_token(
    arch: ModelArch, targets: tuple[str, ...], act_bytes: float, adapter_bytes: float
) -> float:
    """Memory traffic of LoRA's unfused elementwise ops per token, forward + backward, all layers.

    peft's LoRA layer runs, per adapted projection: cast the input to the adapter dtype, dropout
    (a copy plus a 1-byte mask), the two small matmuls, scale, and add into the base output; each
    is its own kernel in eager mode. Per token that reads/writes ~d_in·(act + 2·adapter + 1) and
    ~d_out·(2·adapter + 2·act) bytes forward; the backward of the same ops moves about as much.
    """
    if not arch.is_transformer:
        return 0.0
    dims = _projection_dims(arch)
    experts = (arch.experts_per_token or 1) if arch.is_moe else 1
    per_layer = 0.0
    for key in lora_targets(arch, targets):
        d_in, d_out = dims[key]
        copies = experts if key in {"gate", "up", "down"} else 1
        per_layer += copies * (
            d_in * (act_bytes + 2 * adapter_bytes + 1) + d_out * (2 * adapter_bytes + 2 * act_bytes)
        )
    return 2 * per_layer * arch.num_layers


def elementwise_bytes_per_token(
    arch: ModelArch,
    act_bytes: float,
    *,
    stream_bytes: float | None = None,
    autocast: bool = False,
    recompute: bool = False,
    fp8: bool = False,
    training: bool = True,
) -> float:
    """Memory traffic of the memory-bound ops of one training token (all layers + the loss).

    Counted per block from eager PyTorch, forward: 2 norms (read + write the stream), 2 residual
    adds (read the stream and the branch output, write the stream), the MLP activation (gated:
    gate, up -> out; GELU: in -> out), rotary on q and k, and the attention output copied back to
    [tokens, heads x dim]. ``stream_bytes`` is the residual stream's element size (fp32 under
    torch.autocast, else ``act_bytes``); with ``autocast`` each norm output is also cast to 16-bit
    before its matmul. The backward moves ``elementwise.backward_factor`` x the forward; a full
    recompute repeats the forward. The fp32 cross-entropy costs ``loss_bytes_per_vocab`` per
    vocabulary entry; fp8 matmuls add a cast of each linear input and output gradient
    (efficiency.toml [elementwise]). ``training=False``: an eager forward pass only, no loss.
    """
    from gpuwise.perf import efficiency as eff

    if not arch.is_transformer:
        return 0.0
    a = act_bytes
    s = a if stream_bytes is None else stream_bytes
    d = arch.hidden_size
    inter = arch.intermediate_size * ((arch.experts_per_token or 1) if arch.is_moe else 1)
    activation = (3 if arch.gated_mlp else 2) * inter * a
    rotary = 0 if not arch.spec.rotary else 2 * (arch.q_dim + arch.kv_dim) * a
    norms = 2 * d * (s + s)
    residual_adds = 2 * d * (s + a + s)
    casts = 2 * d * (s + a) if autocast else 0.0
    head_merge = 2 * arch.q_dim * a
    forward = norms + residual_adds + casts + activation + rotary + head_merge
    if not training:
        return forward * arch.num_layers
    passes = 1 + eff.constants().elementwise.backward_factor + (1 if recompute else 0)
    per_layer = forward * passes
    if fp8:
        mlp_in = 2 * inter if arch.gated_mlp else inter
        inputs = 2 * d + arch.q_dim + inter  # qkv, o, up/gate (shared input), down
        grads = (arch.q_dim + 2 * arch.kv_dim) + d + mlp_in + d
        per_layer += (inputs + grads) * eff.constants().elementwise.fp8_cast_bytes_per_element
    loss = arch.vocab_size * eff.constants().elementwise.loss_bytes_per_vocab if arch.is_decoder else 0.0
    return per_layer * arch.num_layers + loss


def attention_bytes_per_token(
    arch: ModelArch, context: float, act_bytes: float, impl: Attention = "sdpa"
) -> float:
    """HBM traffic of one token's attention forward (all layers); the backward moves twice that.

    Fused kernels (flash / SDPA) read q, k, v and write the output. Eager attention also
    materializes ``heads x context`` scores per token (the full row even under a causal mask) and
    moves each through the matmul, scale, mask, fp32 softmax and cast: 8a + 8 bytes per element
    with 16-bit scores, 8a in fp32 (efficiency.toml [elementwise]).
    """
    if not arch.is_transformer:
        return 0.0
    a = act_bytes
    fused = 2 * (arch.q_dim + arch.kv_dim) * a
    scores = 0.0
    if impl == "eager":
        per_score = 8 * a + (8 if a < 4 else 0)
        scores = arch.num_attention_heads * context * per_score
    return (fused + scores) * arch.num_layers


@dataclass(frozen=True)
class TrainingFlops:
    """FLOPs of one micro-batch through the whole model (all GPUs together).

    ``model`` is what MFU counts (no recompute); ``executed`` adds activation recomputation.
    Linear and attention FLOPs are kept apart because they run at different rates.
    """

    tokens: int
    linear_model: float
    attention_model: float
    linear_recompute: float
    attention_recompute: float

    @property
    def model(self) -> float:
        """FLOPs the model needs per step (linear + attention), without recompute: the MFU numerator."""
        return self.linear_model + self.attention_model

    @property
    def executed(self) -> float:
        """FLOPs the GPUs execute per step: the model's plus what activation checkpointing recomputes (the
        HFU numerator)."""
        return self.model + self.linear_recompute + self.attention_recompute

    @property
    def linear_executed(self) -> float:
        """Executed FLOPs of the matmuls with weights (model + recompute)."""
        return self.linear_model + self.linear_recompute

    @property
    def attention_executed(self) -> float:
        """Executed FLOPs of attention's score and value products (model + recompute)."""
        return self.attention_model + self.attention_recompute

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the ``model`` and ``executed`` totals."""
        return {**asdict(self), "model": self.model, "executed": self.executed}


def training_flops(
    arch: ModelArch,
    tokens: int,
    seq_len: int,
    *,
    lora_rank: int | None = None,
    lora_target_names: tuple[str, ...] = ("all-linear",),
    checkpointing: Checkpointing = "none",
    causal: bool | None = None,
    selective_linear_fraction: float = 0.0,
) -> TrainingFlops:
    """FLOPs for ``tokens`` tokens (micro-batch × sequence) of a training step.

    Full training: linear 6·P per token (forward 2, input-grad 2, weight-grad 2).
    LoRA: frozen base weights skip the weight-gradient matmul (4·P), adapters cost 6·P_adapter.
    Attention: forward + 2× for backward. Full recompute repeats the forward; selective
    recompute (Korthikanti et al. 2022) repeats only the attention core, plus
    ``selective_linear_fraction`` of the forward matmuls where a framework's "selective" recomputes
    some blocks or matmuls too (torchtitan: half).
    """
    causal = arch.is_decoder if causal is None else causal
    params = matmul_params(arch)
    attn_fwd = attention_flops_per_token(arch, seq_len, causal) * tokens
    linear_fwd = 2.0 * params * tokens
    if lora_rank:
        adapter_fwd = 2.0 * lora_active_params(arch, lora_rank, lora_target_names) * tokens
        linear_model = 2.0 * linear_fwd + 3.0 * adapter_fwd
        linear_recompute_base = linear_fwd + adapter_fwd
    else:
        linear_model = 3.0 * linear_fwd
        linear_recompute_base = linear_fwd
    attention_model = 3.0 * attn_fwd
    if checkpointing == "full":
        linear_recompute, attention_recompute = linear_recompute_base, attn_fwd
    elif checkpointing == "selective":
        linear_recompute, attention_recompute = selective_linear_fraction * linear_recompute_base, attn_fwd
    else:
        linear_recompute, attention_recompute = 0.0, 0.0
    return TrainingFlops(tokens, linear_model, attention_model, linear_recompute, attention_recompute)


def palm_flops_per_token(arch: ModelArch, seq_len: int) -> float:
    """Training FLOPs per token in the convention most published MFU figures use.

    6·P + 12·L·q_dim·s (PaLM appendix B; Megatron, llm-foundry and torchtitan use the same
    non-causal attention term). Use it to compare with a published MFU, not to predict time.
    """
    return 6.0 * matmul_params(arch) + 12.0 * arch.num_layers * arch.q_dim * seq_len
