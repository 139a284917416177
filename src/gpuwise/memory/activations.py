"""Activation memory: the tensors autograd keeps alive between forward and backward.

Instead of a closed formula, one transformer block is walked op by op and every tensor that
backward needs is recorded once (by identity, so a tensor saved by several ops counts once).
What is saved follows PyTorch's autograd rules: a matmul keeps its input only when the weight
needs a gradient (a frozen ``nn.Linear`` keeps just the weight). Quantized linears follow their
library (``frameworks.quantized_linear_keeps_input``): bitsandbytes' 8-bit matmul keeps its input
(``ctx.tensors = (CAt, subA, A)``), its 4-bit matmul keeps only the packed weight since 0.43.2
(``ctx.tensors = (None, B)``; before, ``(A, B)``). SDPA/flash keep q, k, v, the output and a
log-sum-exp; eager attention keeps the softmax probabilities (HF upcasts them to fp32 first);
SiLU/GELU keep their input — transformers' ``gelu_new`` (GPT-2, GPT-J, Phi-1.5/2) is written in
Python and keeps three more MLP-wide tensors; a product keeps both factors; dropout keeps a 1-byte
mask. Per-layer totals are per micro-batch.

Tensor parallelism is assumed to come with sequence parallelism (Korthikanti et al.,
arXiv:2205.05198), so every per-layer activation divides by ``tp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwise.catalog import ModelArch
from gpuwise.catalog.families import family_spec
from gpuwise.memory.frameworks import LOGITS_16BIT_SHIFTED, Profile, loss_logits, quantized_linear_keeps_input
from gpuwise.memory.regime import Regime
from gpuwise.memory.shapes import hf_module, mlp_names, resolve_targets
from gpuwise.workload import Workload

__all__ = [
    "ENCODER_CLASSES",
    "Dtypes",
    "LayerActivations",
    "Saved",
    "block_dtypes",
    "expands_kv",
    "head_activation_bytes",
    "kbit_upcast",
    "layer_activations",
    "logits_bytes",
    "output_vocab",
    "saved_per_token",
]


# Per-family block layout, dropout and Python GELU: gpuwise.catalog.families (FamilySpec).
ENCODER_CLASSES = 1000  # encoders (bert, vit) are assumed to train a classification head
# FamilySpec.python_gelu: families whose transformers config uses hidden_act "gelu_new" (transformers
# activations.NewGELUActivation: 0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3))) in Python). Autograd
# keeps x (pow), tanh's output, 1 + tanh and 0.5 * x: three tensors beyond the input. Gemma's
# gelu_pytorch_tanh and nn.GELU are native.


def expands_kv(arch: ModelArch, w: Workload, profile: Profile) -> bool:
    """Whether K/V are expanded to every query head before attention (GQA/MQA models under SDPA)."""
    if w.attention == "flash" or arch.kv_dim >= arch.q_dim:
        return False
    if w.attention == "eager":
        return True  # eager attention's matmuls take K/V per query head (transformers' repeat_kv)
    return profile.repeat_kv_for_sdpa or arch.head_dim > profile.native_gqa_max_head_dim


@dataclass
class Saved:
    """Tensors kept for backward, by identity -> bytes."""

    tensors: dict[str, float] = field(default_factory=dict)
    attention_core: set[str] = field(default_factory=set)  # what selective recompute drops
    on_ctx: set[str] = field(default_factory=set)  # held as autograd.Function ctx attributes (bitsandbytes)

    def keep(self, name: str, nbytes: float, core: bool = False, ctx: bool = False) -> None:
        """Record a tensor of ``nbytes`` that backward needs (once per name); ``core`` marks the attention
        core that selective recompute drops, ``ctx`` a bitsandbytes ctx attribute."""
        self.tensors[name] = nbytes
        if core:
            self.attention_core.add(name)
        if ctx:
            self.on_ctx.add(name)

    def ctx_bytes(self) -> float:
        """Bytes of the tensors kept as bitsandbytes ctx attributes (freed only with the whole graph)."""
        return sum(self.tensors[k] for k in self.on_ctx)

    @property
    def total(self) -> float:
        """Bytes of every recorded tensor: what one layer keeps without recompute."""
        return sum(self.tensors.values())

    def without_core(self) -> float:
        """Bytes kept when the attention core (scores, softmax, dropout) is recomputed: selective
        recompute."""
        return sum(v for k, v in self.tensors.items() if k not in self.attention_core)


@dataclass(frozen=True)
class LayerActivations:
    """What one transformer layer holds per micro-batch, in bytes per GPU, for each checkpointing mode,
    plus the transient working sets of its backward and of a forward without autograd."""

    saved_bytes: float  # kept per layer without recompute
    selective_bytes: float  # kept per layer with the attention core recomputed
    input_bytes: float  # the block input (what full recompute keeps)
    backward_workspace_bytes: float  # transient gradients while one layer runs backward
    prefill_workspace_bytes: float  # transient working set of one layer without autograd
    ctx_held_bytes: float = 0.0  # inputs bitsandbytes keeps on ctx (released only with the whole graph)
    kv_expand_bytes: float = (
        0.0  # what expanding K and V to every query head adds (GQA under SDPA with a mask)
    )


@dataclass(frozen=True)
class Dtypes:
    """Element sizes inside a block for one workload."""

    residual: float  # residual stream and norm inputs
    matmul_out: float  # outputs of linears (fp32 when bitsandbytes casts back to an fp32 input)
    compute: float  # 16-bit (or fp32) compute dtype
    attention: float  # q/k/v as the attention kernel sees them
    adapter: float  # LoRA adapter dtype
    lora_input: float  # what the adapter's first matmul keeps of its input (a 16-bit copy under autocast)


def kbit_upcast(w: Workload, regime: Regime, profile: Profile) -> bool:
    """peft's prepare_model_for_kbit_training ran: non-quantized weights, and so the residual
    stream, are fp32.

    The QLoRA recipes that use it train under autocast (``fp16=True``/``bf16=True``), so matmuls keep
    16-bit copies of their inputs. TRL skips it for sharded QLoRA (FSDP/ZeRO-3 need one dtype
    across a flat parameter).
    """
    sharded = w.sharding in ("fsdp", "zero3") and w.data_parallel > 1
    return regime.quantized and w.is_training and profile.kbit_upcast and not sharded


def block_dtypes(w: Workload, regime: Regime, profile: Profile) -> Dtypes:
    """Bytes per element of the block's tensors (residual stream, matmul outputs, attention operands,
    norms) under the workload's precision, autocast and k-bit upcasting."""
    upcast = kbit_upcast(w, regime, profile)
    residual = 4.0 if upcast else regime.residual_bytes
    matmul_out = 4.0 if upcast else regime.compute_bytes
    if upcast:
        # flash-attn gets 16-bit q/k/v from HF; SDPA is on CUDA autocast's lower-precision list, so it saves
        # 16-bit casts too; eager attention keeps fp32 operands (its softmax returns the fp32 query dtype).
        attention = 4.0 if w.attention == "eager" else 2.0
    else:
        attention = regime.compute_bytes
    adapter = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}[w.lora_dtype]
    if profile.adapter_dtype_from_model:
        adapter = regime.compute_bytes if not regime.is_amp else 4.0
    # Under autocast the adapter's matmul keeps its own 16-bit cast of the (fp32) dropout output.
    lora_input = regime.compute_bytes if (regime.is_amp or upcast) else adapter
    return Dtypes(residual, matmul_out, regime.compute_bytes, attention, adapter, lora_input)


def layer_activations(
    arch: ModelArch, w: Workload, regime: Regime, profile: Profile, batch: int, seq: int
) -> LayerActivations:
    """Walk one block for a micro-batch of ``batch`` × ``seq`` tokens (before the tp split)."""
    walk = _BlockWalk(arch, w, regime, profile, batch, seq)
    s = walk.run()
    dt, t, h, qd, kvd = walk.dt, walk.t, arch.hidden_size, arch.q_dim, arch.kv_dim
    backward_ws, prefill_ws = _layer_workspaces(arch, w, dt, batch, seq)
    tp = w.tp
    return LayerActivations(
        saved_bytes=s.total / tp,
        selective_bytes=s.without_core() / tp,
        input_bytes=dt.residual * t * h / tp,
        backward_workspace_bytes=backward_ws / tp,
        prefill_workspace_bytes=prefill_ws / tp,
        ctx_held_bytes=s.ctx_bytes() / tp,
        kv_expand_bytes=0.0 if w.attention == "flash" else 2 * dt.attention * t * max(qd - kvd, 0) / tp,
    )


@dataclass(frozen=True)
class SavedPerToken:
    """What one layer keeps for backward, tensor by tensor in the order autograd saves them, for the
    allocator replay: bytes per token of the attention half and of the MLP half, and bytes per token and
    per token of the sequence (scores: batch x heads x seq^2) of the eager attention core; the block input
    itself is left out (the replay keeps every layer's input anyway)."""

    attention: tuple[float, ...]
    mlp: tuple[float, ...]
    scores: tuple[float, ...]


def saved_per_token(arch: ModelArch, w: Workload, regime: Regime, profile: Profile) -> SavedPerToken:
    """The walk of :func:`layer_activations` at the workload's ``seq_len``, per token (see SavedPerToken)."""
    seq = max(w.seq_len, 1)
    walk = _BlockWalk(arch, w, regime, profile, 1, seq)
    s = walk.run()
    attention: list[float] = []
    mlp: list[float] = []
    scores: list[float] = []
    for index, (name, nbytes) in enumerate(s.tensors.items()):
        if name == "x":
            continue
        if name in s.attention_core and w.attention == "eager":
            scores.append(nbytes / (seq * seq) / w.tp)
        else:
            (attention if index < walk.attention_end else mlp).append(nbytes / seq / w.tp)
    return SavedPerToken(tuple(attention), tuple(mlp), tuple(scores))


def _layer_workspaces(arch: ModelArch, w: Workload, dt: Dtypes, batch: int, seq: int) -> tuple[float, float]:
    """Transient bytes of one layer: its backward's gradients, and a forward without autograd."""
    t = batch * seq
    h, i, qd, kvd = arch.hidden_size, arch.intermediate_size, arch.q_dim, arch.kv_dim
    scores = batch * arch.num_attention_heads * seq * seq
    k = arch.experts_per_token if arch.is_moe else 1
    experts = max(arch.num_experts, 1)  # MoE experts run (and backpropagate) one after another
    grad_mlp = 3 * dt.matmul_out * t * k * i / experts
    grad_attn = dt.attention * t * (qd + 2 * kvd) + 4.0 * t * qd
    if w.attention == "eager":
        grad_attn += (2 * dt.attention if arch.spec.scores_16bit else 4.0 + dt.attention) * scores
    backward_ws = max(grad_mlp, grad_attn) + 2 * dt.residual * t * h
    prefill_ws = dt.compute * t * (2 * h + qd + 2 * kvd + 3 * k * i / experts)
    if w.attention == "eager":
        prefill_ws += (4.0 + dt.compute) * scores
    return backward_ws, prefill_ws


class _BlockWalk:
    """What one transformer block keeps for backward, op by op, in the order autograd saves it."""

    def __init__(
        self, arch: ModelArch, w: Workload, regime: Regime, profile: Profile, batch: int, seq: int
    ) -> None:
        self.arch, self.w, self.regime, self.profile = arch, w, regime, profile
        self.batch, self.seq, self.t = batch, seq, batch * seq
        self.dt = block_dtypes(w, regime, profile)
        self.full = w.is_training and not w.is_lora
        self.targets = set(resolve_targets(arch, w.lora_targets)) if w.is_lora else set()
        self.quantized = regime.quantized
        self.quant_keeps = regime.quantized and quantized_linear_keeps_input(profile, w.precision)
        spec = arch.spec
        self.python_gelu = profile.transformers_modeling and spec.python_gelu and not arch.gated_mlp
        self.hidden_drop, self.attn_drop = spec.dropout
        self.layout = spec.effective_block(arch.num_kv_heads)
        self.saved = Saved()
        self.attention_end = 0  # how many saved tensors the attention half (with its norm) recorded

    def _attention_done(self) -> None:
        self.attention_end = len(self.saved.tensors)

    def run(self) -> Saved:
        if self.layout == "parallel_shared_norm":
            n1 = self.norm("n1", "x")
            self.attention(n1)
            self._attention_done()
            self.mlp(n1)
        elif self.layout == "parallel_two_norms":
            self.attention(self.norm("n1", "x"))
            self._attention_done()
            self.mlp(self.norm("n2", "x"))
        else:
            self.attention(self.norm("n1", "x"))
            self._attention_done()
            self.mlp(self.norm("n2", "x_mid"))
        return self.saved

    def norm(self, name: str, src: str) -> str:
        """A norm on tensor ``src`` (residual dtype); returns the id of its output."""
        s, dt, t, h = self.saved, self.dt, self.t, self.arch.hidden_size
        layernorm = self.arch.norm_type.startswith("layernorm")
        if self.profile.compiled:
            s.keep(src, dt.residual * t * h)  # fused norm kernel: its input (+ per-row rstd) only
            return name
        if layernorm or not self.profile.norm_fp32_saved:
            s.keep(src, dt.residual * t * h)  # native layer_norm keeps its input (+ tiny mean/rstd)
        else:
            # RMSNorm computes in fp32: pow/mul keep the fp32 copy of the input (the input itself if fp32).
            s.keep(src if dt.residual == 4 else f"{src}.fp32", 4.0 * t * h)
        if self.full and not layernorm:
            s.keep(f"{name}.normed", dt.residual * t * h)  # python RMSNorm: weight * x_normed keeps x_normed
        return name

    def linear(self, name: str, src: str, src_bytes: float, d_in: int, tokens: float | None = None) -> None:
        """What a linear (with or without a LoRA adapter) keeps for backward."""
        s, dt, w, profile = self.saved, self.dt, self.w, self.profile
        tokens = self.t if tokens is None else tokens
        if self.quantized:
            # bitsandbytes Linear4bit casts its input to the compute dtype first; Linear8bitLt takes it as is.
            if self.quant_keeps and src_bytes != dt.compute and w.precision != "int8":
                s.keep(f"{src}->{name}.cast", dt.compute * tokens * d_in, ctx=True)
            elif self.quant_keeps:
                s.keep(src, src_bytes * tokens * d_in, ctx=True)
        elif self.full or profile.frozen_linear_saves_input:
            if src_bytes != dt.compute and self.regime.is_amp:
                s.keep(f"{src}->{name}.cast", dt.compute * tokens * d_in)  # autocast: per-layer 16-bit cast
            else:
                s.keep(src, src_bytes * tokens * d_in)
        if name in self.targets:
            self._adapter(name, src, src_bytes, d_in, tokens)

    def _adapter(self, name: str, src: str, src_bytes: float, d_in: int, tokens: float) -> None:
        """A LoRA adapter's saved input (dropout output, cast or the input itself) and A output."""
        s, dt, profile = self.saved, self.dt, self.profile
        # peft adapts a fused Hugging Face module (phi-3's qkv_proj) once: one input copy for q, k and v.
        module = hf_module(self.arch, name) if profile.lora_input_per_module else name
        key = f"{module}.lora" if profile.lora_input_per_module else f"{src}.lora"
        if profile.lora_dropout > 0:
            s.keep(f"{key}.dropout", dt.lora_input * tokens * d_in)
            s.keep(f"{key}.mask", 1.0 * tokens * d_in)
        elif dt.lora_input != src_bytes:
            s.keep(f"{key}.cast", dt.lora_input * tokens * d_in)
        else:
            s.keep(src, src_bytes * tokens * d_in)
        s.keep(f"{module}.lora_a_out", dt.lora_input * tokens * self.w.lora_rank)

    def attention(self, src: str) -> str:
        s, dt, t, arch = self.saved, self.dt, self.t, self.arch
        qd = arch.q_dim
        for name in ("q", "k", "v"):
            self.linear(name, src, dt.residual, arch.hidden_size)
        kv_eff = qd if expands_kv(arch, self.w, self.profile) else arch.kv_dim
        s.keep("q", dt.attention * t * qd)
        s.keep("k", dt.attention * t * kv_eff)
        s.keep("v", dt.attention * t * kv_eff)
        if self.w.attention == "eager":
            scores = self.batch * arch.num_attention_heads * self.seq * self.seq
            # HF decoders: softmax in fp32, then cast back (not SDPA's math path: FamilySpec.scores_16bit)
            decoder_upcast = arch.is_decoder and not arch.spec.scores_16bit
            s.keep("probs", (4.0 + dt.attention if decoder_upcast else dt.attention) * scores, core=True)
            if self.attn_drop > 0:
                s.keep("probs.mask", 1.0 * scores, core=True)
                s.keep("probs.dropped", dt.attention * scores, core=True)
            s.keep("attn.out", dt.attention * t * qd)  # transpose + reshape copy feeding o_proj
        else:
            s.keep("attn.out", dt.attention * t * qd)  # kernel output, (b, s, heads, d) already
            s.keep("attn.lse", 4.0 * self.batch * arch.num_attention_heads * self.seq)
        self.linear("o", "attn.out", dt.attention, qd)
        if self.hidden_drop > 0:
            s.keep("attn.drop.mask", 1.0 * t * arch.hidden_size)
        return "attn.out"

    def mlp(self, src: str) -> None:
        s, dt, t, arch = self.saved, self.dt, self.t, self.arch
        h = arch.hidden_size
        tokens = t * (arch.experts_per_token if arch.is_moe else 1)
        if arch.is_moe:
            s.keep("router.probs", 4.0 * t * arch.num_experts)  # fp32 routing softmax
            if self.full or self.profile.frozen_linear_saves_input:
                s.keep(src, dt.residual * t * h)  # the router's input
        for name in mlp_names(arch):
            if name == "down":
                continue
            self.linear(name, src if not arch.is_moe else f"{src}.routed", dt.residual, h, tokens)
        prod, down_in = self._activation(tokens)
        self.linear("down", prod, down_in, arch.intermediate_size, tokens)
        if self.hidden_drop > 0:
            s.keep("mlp.drop.mask", 1.0 * t * h)

    def _activation(self, tokens: float) -> tuple[str, float]:
        """What the MLP activation keeps; returns the down projection's input and its element size."""
        s, dt, i = self.saved, self.dt, self.arch.intermediate_size
        up_out = dt.matmul_out * tokens * i
        if self.arch.gated_mlp:
            s.keep("gate.out", up_out)  # activation input
            if not self.profile.compiled:  # fused SiLU·mul recomputes silu(gate) in backward
                s.keep("act.out", up_out)  # product keeps both factors
            s.keep("up.out", up_out)
            return "prod", dt.matmul_out
        if self.python_gelu:
            # pow keeps x; under CUDA autocast pow runs in fp32, so x is kept as an fp32 copy and tanh,
            # 1 + tanh and the product are fp32 too; 0.5 * x stays in the matmul dtype.
            down_in = 4.0 if self.regime.is_amp else dt.matmul_out
            s.keep("up.out" if down_in == dt.matmul_out else "up.out.fp32", down_in * tokens * i)
            s.keep("gelu.tanh", down_in * tokens * i)
            s.keep("gelu.one_plus_tanh", down_in * tokens * i)
            s.keep("gelu.half_x", up_out)
            return "act.out", down_in
        s.keep("up.out", up_out)  # GELU input
        return "act.out", dt.matmul_out


def output_vocab(arch: ModelArch) -> int:
    """Columns of the output layer: the vocabulary, or a classification head for encoders."""
    return arch.vocab_size if arch.is_decoder and arch.vocab_size else ENCODER_CLASSES


def head_activation_bytes(
    arch: ModelArch, w: Workload, regime: Regime, profile: Profile, batch: int, seq: int
) -> float:
    """Final norm and what the lm_head keeps of its input (trainable or bitsandbytes-quantized head)."""
    dt = block_dtypes(w, regime, profile)
    t = batch * seq
    total = (4.0 if dt.residual != 4 and profile.norm_fp32_saved else dt.residual) * t * arch.hidden_size
    if regime.quantized and profile.quantize_lm_head:
        head_keeps_input = quantized_linear_keeps_input(profile, w.precision)
    else:
        head_keeps_input = profile.frozen_linear_saves_input
    head_keeps_input = head_keeps_input or (w.is_training and not w.is_lora)
    if w.is_lora and "lm_head" in resolve_targets(arch, w.lora_targets):
        head_keeps_input = True
    if head_keeps_input and arch.is_decoder:
        total += dt.compute * t * arch.hidden_size
    return total


def logits_bytes(
    arch: ModelArch, w: Workload, regime: Regime, profile: Profile, batch: int, seq: int
) -> tuple[float, float]:
    """(forward, backward) peak bytes of the logits and the loss for one micro-batch."""
    vocab = output_vocab(arch)
    if not arch.is_decoder:
        t = batch  # classification: one row per sample
    else:
        t = batch * seq
    fwd, bwd = loss_logits(profile)
    if (
        profile.transformers_modeling
        and not profile.chunked_loss
        and family_spec(arch.family).loss_16bit_shifted
    ):
        fwd, bwd = LOGITS_16BIT_SHIFTED  # the model's own loss code, run as written
    if regime.compute_bytes == 4 and fwd == 10.0:
        fwd = 8.0  # fp32 model: the .float() upcast is a no-op
    return fwd * t * vocab / w.tp, bwd * t * vocab / w.tp
