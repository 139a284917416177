"""The model-family registry: one ``FamilySpec`` per family, every family fact in one place.

A catalog row, a Hugging Face ``config.json`` and a vision architecture all name a family
(``llama-3.1``, ``gpt2``, ``resnet``, ``unet``…). What the rest of gpuwise needs to know about that
family — whether it is a decoder, an encoder, a ViT, a conv net or a diffusion model; which Hugging
Face ``model_type`` s it comes from; how its parameters are laid out (biases, position tables, norms
per block); what its reference implementation keeps for backward (Python GELU, dropout); which of its
projections transformers fuses; which transformers config class rebuilds it — is a field here.
``memory``, ``perf``, ``simulation`` and ``catalog.models`` ask ``family_spec(name)`` instead of
comparing family strings, so adding a family is one ``FamilySpec`` in ``FAMILIES`` plus its name in
the ``Family`` Literal (``tests/catalog/test_families.py`` checks the two agree).

A user's own catalog entry may carry any family label (the default is its id): ``family_spec`` then
answers with the generic spec of the entry's ``mlp_type`` (a Llama-shaped decoder, an MoE, a conv
net or a diffusion model), which is what such entries always meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal, get_args

from gpuwise.errors import GpuwiseError, did_you_mean

__all__ = [
    "BIAS_KINDS",
    "FAMILIES",
    "KINDS",
    "MLP_TYPES",
    "NON_TRANSFORMER_TYPES",
    "NORM_TENSORS",
    "NORM_TYPES",
    "BlockLayout",
    "Family",
    "FamilySpec",
    "Kind",
    "MlpType",
    "NormType",
    "family_for_hf_model_type",
    "family_spec",
    "parse_mlp_type",
    "parse_norm_type",
]

Family = Literal[
    # decoder LLMs
    "baichuan",
    "code-llama",
    "falcon",
    "gemma",
    "gpt-j",
    "gpt2",
    "gpt3",
    "llama",
    "llama-1",
    "llama-2",
    "llama-3",
    "llama-3.1",
    "llama-3.2",
    "llama-3.3",
    "megatron-gpt",
    "mistral",
    "mpt",
    "phi",
    "phi-3",
    "qwen",
    "qwen2",
    "qwen2.5",
    "qwen3",
    "stablelm-alpha",
    "tinyllama",
    "yi",
    # mixture of experts
    "mixtral",
    # encoders
    "bert",
    # vision transformers (ViT, CLIP's vision tower)
    "vit",
    # conv nets
    "convnext",
    "efficientnet",
    "resnet",
    # diffusion: UNet, DiT, MMDiT denoisers and the catalog's pipeline names for them
    "dit",
    "flux",
    "mmdit",
    "stable-diffusion",
    "stable-diffusion-xl",
    "unet",
]
# What kind of network a family is: decides how memory, perf and the simulator walk it.
Kind = Literal["decoder", "moe", "encoder", "vit", "cnn", "diffusion"]
KINDS: tuple[Kind, ...] = get_args(Kind)
# The MLP of a transformer block, or a marker that the network is not described by transformer columns.
MlpType = Literal[
    "gated_silu", "gated_gelu", "gelu", "gated_silu_moe", "conv", "diffusion-unet", "diffusion-transformer"
]
MLP_TYPES: tuple[MlpType, ...] = get_args(MlpType)
NormType = Literal["rmsnorm", "layernorm", "layernorm_nobias", "batchnorm", "groupnorm+layernorm"]
NORM_TYPES: tuple[NormType, ...] = get_args(NormType)
# Tensors of hidden_size elements one norm holds: LayerNorm a weight and a bias, the others a weight.
NORM_TENSORS: Mapping[NormType, int] = MappingProxyType(
    {"rmsnorm": 1, "layernorm": 2, "layernorm_nobias": 1, "batchnorm": 1, "groupnorm+layernorm": 1}
)
# Models the transformer columns cannot describe (gpuwise.vision builds them from their own data).
NON_TRANSFORMER_TYPES: frozenset[MlpType] = frozenset({"conv", "diffusion-unet", "diffusion-transformer"})
# Which linear layers of a block carry a bias: none, only q/k/v, or all of them.
BiasKind = Literal["none", "qkv", "all"]
BIAS_KINDS: tuple[BiasKind, ...] = get_args(BiasKind)
# How attention and MLP sit in a block: one after the other (two norms), in parallel off one shared
# norm, in parallel off two norms, or Falcon's rule (one shared norm with multi-query attention, else two).
BlockLayout = Literal["sequential", "parallel_shared_norm", "parallel_two_norms", "shared_norm_if_mqa"]

# Hugging Face modules that hold several projections in one nn.Linear, so peft adapts the group as one
# module: transformers modeling_phi3 (qkv_proj, gate_up_proj), modeling_falcon and modeling_gpt_neox
# (query_key_value), modeling_gpt2 (c_attn), modeling_mpt (Wqkv).
_QKV: tuple[tuple[str, str], ...] = (("q", "qkv"), ("k", "qkv"), ("v", "qkv"))
_QKV_GATE_UP: tuple[tuple[str, str], ...] = (*_QKV, ("gate", "gate_up"), ("up", "gate_up"))


@dataclass(frozen=True)
class FamilySpec:
    """Everything gpuwise knows about one model family.

    ``hf_*`` fields map a Hugging Face ``config.json`` onto catalog columns; the layout fields decide
    the parameter count from the shapes (exact for the decoder families of the catalog); the
    ``python_gelu``/``dropout``/``fused_modules`` fields are what the reference implementation keeps
    for backward and how peft sees its projections; ``builds_as`` is the transformers ``model_type``
    whose config class rebuilds the architecture for the traced simulator (None: none does).
    """

    name: str
    kind: Kind
    hf_model_types: tuple[str, ...] = ()  # config.json model_type values that mean this family
    hf_mlp: MlpType = "gated_silu"  # MLP those configs describe
    hf_norm: NormType = "rmsnorm"
    hf_ties_embeddings: bool = True  # tie_word_embeddings when config.json omits it (transformers' default)
    hf_act_decides_gate: bool = False  # a GELU ``hidden_act`` makes the gated MLP gated_gelu (Llama configs)
    bias: BiasKind = "none"
    learned_positions: bool = False  # an absolute position table of max_position_embeddings × hidden
    block: BlockLayout = "sequential"
    lm_head_bias: bool = False
    token_types: bool = False  # BERT: token-type embeddings + an embedding LayerNorm, no final norm
    rotary: bool = True  # rotary position embeddings applied to q and k in every layer
    token_transformer: bool = True  # tokens through transformer blocks (fp32 residual stream under autocast)
    depthwise_convs: bool = False  # depthwise convolutions (memory-bound kernels)
    python_gelu: bool = False  # transformers' gelu_new, written in Python (keeps three more tensors)
    dropout: tuple[float, float] = (0.0, 0.0)  # hidden, attention dropout of the reference config
    fused_modules: tuple[tuple[str, str], ...] = ()  # (projection, the HF module holding it with others)
    # The reference code's loss runs on the 16-bit logits (a contiguous shifted copy, no fp32 upcast):
    # Qwen v1's remote modeling_qwen.py (QWenLMHeadModel.forward: lm_logits[..., :-1, :].contiguous()).
    loss_16bit_shifted: bool = False
    # Materialized attention scores are softmaxed in the model dtype, not upcast to fp32: Qwen v1's
    # modeling_qwen.py (SUPPORT_TORCH2 branch) calls F.scaled_dot_product_attention with an explicit mask,
    # whose math path (torch _scaled_dot_product_attention_math) keeps the 16-bit softmax output only.
    scores_16bit: bool = False
    builds_as: str | None = None  # transformers model_type that rebuilds it (traced simulator)

    def hf_module(self, name: str) -> str:
        """The Hugging Face module block linear ``name`` (q, k, v, o, gate, up, down) lives in:
        ``qkv`` for q/k/v of a fused-projection model, else ``name`` itself."""
        return dict(self.fused_modules).get(name, name)

    @property
    def is_decoder(self) -> bool:
        """A causal language model (dense or MoE): generates tokens, has a KV cache."""
        return self.kind in ("decoder", "moe")

    @property
    def takes_images(self) -> bool:
        """Its input is an image (or a latent): ViTs, conv nets, diffusion denoisers."""
        return self.kind in ("vit", "cnn", "diffusion")

    @property
    def is_layer_list(self) -> bool:
        """Described by gpuwise.vision's layer list rather than the transformer columns."""
        return self.kind in ("cnn", "diffusion")

    def one_norm_per_block(self, num_kv_heads: int) -> bool:
        """Whether attention and MLP share one norm (a parallel block); Falcon-40B keeps two, 7B one."""
        return self.effective_block(num_kv_heads) == "parallel_shared_norm"

    def effective_block(self, num_kv_heads: int) -> BlockLayout:
        """The layout of a model of this family with ``num_kv_heads`` KV heads (resolves Falcon's rule)."""
        if self.block == "shared_norm_if_mqa":
            return "parallel_shared_norm" if num_kv_heads == 1 else "parallel_two_norms"
        return self.block


_LLAMA_LIKE = FamilySpec("llama", "decoder", builds_as="llama")  # no biases, rotary, two norms per block
# GPT-2-style decoders: biases everywhere, learned positions, no rotary, fused c_attn.
_GPT2_STYLE = replace(
    _LLAMA_LIKE, bias="all", learned_positions=True, rotary=False, fused_modules=_QKV, builds_as="gpt2"
)
# Hugging Face configs of the GELU/LayerNorm families.
_HF_GELU = replace(_LLAMA_LIKE, hf_mlp="gelu", hf_norm="layernorm")
_PARALLEL_GELU = replace(
    _HF_GELU,
    hf_ties_embeddings=False,
    bias="all",
    block="parallel_shared_norm",
    lm_head_bias=True,
    python_gelu=True,
)
_CNN = FamilySpec("cnn", "cnn", token_transformer=False)
_UNET = FamilySpec("unet", "diffusion", token_transformer=False)
_DIFFUSION_TRANSFORMER = FamilySpec("dit", "diffusion")

_SPECS: tuple[FamilySpec, ...] = (
    replace(_LLAMA_LIKE, hf_model_types=("llama",), hf_ties_embeddings=False, hf_act_decides_gate=True),
    *(
        replace(_LLAMA_LIKE, name=n)
        for n in ("llama-1", "llama-2", "llama-3", "llama-3.1", "llama-3.2", "llama-3.3")
    ),
    *(replace(_LLAMA_LIKE, name=n) for n in ("code-llama", "tinyllama", "yi", "baichuan")),
    replace(
        _LLAMA_LIKE,
        name="mistral",
        hf_model_types=("mistral",),
        hf_ties_embeddings=False,
        builds_as="mistral",
    ),
    # Qwen v1 (2023, trust_remote_code): c_attn with a bias, untied head, loss on 16-bit logits
    replace(
        _LLAMA_LIKE,
        name="qwen",
        hf_model_types=("qwen",),
        bias="qkv",
        loss_16bit_shifted=True,
        scores_16bit=True,
    ),
    replace(_LLAMA_LIKE, name="qwen2", hf_model_types=("qwen2",), bias="qkv", builds_as="qwen2"),
    replace(_LLAMA_LIKE, name="qwen2.5", bias="qkv", builds_as="qwen2"),
    replace(_LLAMA_LIKE, name="qwen3", hf_model_types=("qwen3",), builds_as="qwen3"),
    replace(
        _LLAMA_LIKE,
        name="phi-3",
        hf_model_types=("phi3",),
        hf_ties_embeddings=False,
        fused_modules=_QKV_GATE_UP,
        builds_as="phi3",
    ),
    replace(
        _LLAMA_LIKE, name="gemma", hf_model_types=("gemma", "gemma2"), hf_mlp="gated_gelu", builds_as="gemma"
    ),
    replace(
        _GPT2_STYLE,
        name="gpt2",
        hf_model_types=("gpt2",),
        hf_mlp="gelu",
        hf_norm="layernorm",
        python_gelu=True,
        dropout=(0.1, 0.1),
    ),
    replace(_GPT2_STYLE, name="gpt3"),
    replace(_GPT2_STYLE, name="megatron-gpt"),
    replace(_PARALLEL_GELU, name="gpt-j", hf_model_types=("gptj",), builds_as="gptj"),
    replace(_PARALLEL_GELU, name="phi", hf_model_types=("phi",), builds_as="phi"),
    replace(
        _HF_GELU,
        name="falcon",
        hf_model_types=("falcon",),
        block="shared_norm_if_mqa",
        fused_modules=_QKV,
        builds_as="falcon",
    ),
    replace(
        _HF_GELU,
        name="stablelm-alpha",
        hf_model_types=("gpt_neox",),
        hf_ties_embeddings=False,
        bias="all",
        block="parallel_two_norms",
        rotary=False,
        fused_modules=_QKV,
        builds_as="gpt_neox",
    ),
    replace(_LLAMA_LIKE, name="mpt", rotary=False, fused_modules=_QKV, builds_as="mpt"),
    replace(
        _LLAMA_LIKE,
        name="mixtral",
        kind="moe",
        hf_model_types=("mixtral",),
        hf_mlp="gated_silu_moe",
        hf_ties_embeddings=False,
        builds_as="mixtral",
    ),
    replace(
        _HF_GELU,
        name="bert",
        kind="encoder",
        hf_model_types=("bert",),
        bias="all",
        learned_positions=True,
        token_types=True,
        rotary=False,
        dropout=(0.1, 0.1),
        builds_as="bert",
    ),
    replace(
        _HF_GELU,
        name="vit",
        kind="vit",
        hf_model_types=("vit",),
        bias="all",
        learned_positions=True,
        rotary=False,
        builds_as="vit",
    ),
    replace(_CNN, name="resnet", builds_as="resnet"),
    replace(_CNN, name="efficientnet", depthwise_convs=True),
    replace(_CNN, name="convnext"),
    _UNET,
    replace(_UNET, name="stable-diffusion"),
    replace(_UNET, name="stable-diffusion-xl"),
    _DIFFUSION_TRANSFORMER,
    replace(_DIFFUSION_TRANSFORMER, name="mmdit"),
    replace(_DIFFUSION_TRANSFORMER, name="flux"),
)
FAMILIES: Mapping[str, FamilySpec] = MappingProxyType({s.name: s for s in _SPECS})

# Unregistered labels (users' own catalog entries): the generic family of their MLP type.
_GENERIC: Mapping[MlpType, FamilySpec] = MappingProxyType(
    {
        "gated_silu": FamilySpec("custom", "decoder"),
        "gated_gelu": FamilySpec("custom", "decoder"),
        "gelu": FamilySpec("custom", "decoder"),
        "gated_silu_moe": FamilySpec("custom", "moe"),
        "conv": FamilySpec("custom", "cnn", token_transformer=False),
        "diffusion-unet": FamilySpec("custom", "diffusion", token_transformer=False),
        "diffusion-transformer": FamilySpec("custom", "diffusion"),
    }
)
_BY_HF_TYPE: Mapping[str, FamilySpec] = MappingProxyType({t: s for s in _SPECS for t in s.hf_model_types})


def family_spec(family: str, mlp_type: MlpType = "gated_silu") -> FamilySpec:
    """The registered spec of ``family``; for a label the registry does not know (a user's own entry),
    the generic spec of its ``mlp_type``."""
    spec = FAMILIES.get(family)
    return spec if spec is not None else _GENERIC[mlp_type]


def family_for_hf_model_type(model_type: str, where: str = "") -> FamilySpec:
    """The family a Hugging Face ``model_type`` maps to, or one clear error naming the known ones."""
    spec = _BY_HF_TYPE.get(model_type)
    if spec is None:
        known = ", ".join(sorted(_BY_HF_TYPE))
        hint = f"gpuwise maps {known}; add the model to a catalog file instead (docs/catalogs.md)"
        err = did_you_mean("Hugging Face model_type", model_type, sorted(_BY_HF_TYPE), hint=hint)
        raise GpuwiseError(f"{where}: {err}") if where else err
    return spec


def parse_mlp_type(value: object, where: str = "") -> MlpType:
    """A catalog/user ``mlp_type`` value checked against ``MlpType`` (default ``gated_silu``)."""
    return _choice(value or "gated_silu", MLP_TYPES, "mlp_type", where)  # type: ignore[return-value]


def parse_norm_type(value: object, where: str = "") -> NormType:
    """A catalog/user ``norm_type`` value checked against ``NormType`` (default ``rmsnorm``)."""
    return _choice(value or "rmsnorm", NORM_TYPES, "norm_type", where)  # type: ignore[return-value]


def _choice(value: object, choices: tuple[str, ...], what: str, where: str) -> str:
    text = str(value).strip()
    if text in choices:
        return text
    err = did_you_mean(what, text, list(choices))
    raise GpuwiseError(f"{where}{err}") if where else err
