"""The model catalog: architectures in Hugging Face ``config.json`` terms, with sources.

A model can also be given as a path to a local ``config.json`` (no weights needed),
or added in a user catalog file (see ``user_files``). Parameter counts are computed
from the shapes (exact for the decoder families here); for CNNs and diffusion models,
whose layers the transformer columns cannot describe, the published count is used.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from gpuwise.catalog.families import (
    NON_TRANSFORMER_TYPES,
    NORM_TENSORS,
    FamilySpec,
    MlpType,
    NormType,
    family_for_hf_model_type,
    family_spec,
    parse_mlp_type,
    parse_norm_type,
)
from gpuwise.errors import GpuwiseError, did_you_mean

__all__ = [
    "NON_TRANSFORMER_TYPES",
    "ModelArch",
    "ParamCounts",
    "clear_cache",
    "get_model",
    "is_vision_model",
    "list_models",
    "model_from_hf_config",
    "model_from_mapping",
    "native_image_size",
]


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by part; ``total`` is what ``sum(p.numel())`` gives for the model."""

    embedding: int  # token (+ position) embeddings
    lm_head: int  # 0 when tied to the embedding
    per_layer_attention: int
    per_layer_mlp: int  # all experts for MoE
    per_layer_norm: int
    final_norm: int
    num_layers: int
    active_per_layer_mlp: int  # experts actually used per token (== per_layer_mlp if dense)

    @property
    def per_layer(self) -> int:
        """Parameters of one block: attention + MLP (all experts) + norms."""
        return self.per_layer_attention + self.per_layer_mlp + self.per_layer_norm

    @property
    def total(self) -> int:
        """All parameters: embeddings, LM head, every block, the final norm."""
        return self.embedding + self.lm_head + self.num_layers * self.per_layer + self.final_norm

    @property
    def active(self) -> int:
        """Parameters used per token (MoE: only the routed experts)."""
        return self.total - self.num_layers * (self.per_layer_mlp - self.active_per_layer_mlp)


@dataclass(frozen=True)
class ModelArch:
    """A model's architecture in Hugging Face ``config.json`` terms (sizes in elements, not bytes).

    ``family`` is a registered ``catalog.families.Family`` for every catalog model; a user's own entry
    may carry any label (then ``spec`` is the generic family of its ``mlp_type``).
    """

    id: str
    family: str
    hidden_size: int = 0
    num_layers: int = 0
    num_attention_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    intermediate_size: int = 0
    vocab_size: int = 0
    max_position_embeddings: int = 0
    tie_word_embeddings: bool = False
    mlp_type: MlpType = "gated_silu"
    num_experts: int = 0
    experts_per_token: int = 0
    norm_type: NormType = "rmsnorm"
    params_b: float | None = None  # published count in billions (for validation and non-transformers)
    source: str = ""
    notes: str = ""
    origin: str = field(default="catalog", compare=False)

    @property
    def spec(self) -> FamilySpec:
        """The family's registry entry (``catalog.families``): kind, layout, HF conventions."""
        return family_spec(self.family, self.mlp_type)

    @property
    def is_transformer(self) -> bool:
        """Described by the transformer columns (not a vision layer list)."""
        return self.mlp_type not in NON_TRANSFORMER_TYPES and self.hidden_size > 0

    @property
    def is_moe(self) -> bool:
        """A mixture of experts: more than one expert per MLP."""
        return self.num_experts > 1

    @property
    def gated_mlp(self) -> bool:
        """SwiGLU/GeGLU: three MLP matrices (gate, up, down) instead of two."""
        return self.mlp_type.startswith("gated")

    @property
    def is_decoder(self) -> bool:
        """A causal language model (generates tokens, keeps a KV cache)."""
        return self.is_transformer and self.spec.is_decoder

    @property
    def q_dim(self) -> int:
        """Width of the query projection: heads × head_dim."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the key (or value) projection: KV heads × head_dim."""
        return self.num_kv_heads * self.head_dim

    def param_counts(self) -> ParamCounts:
        """Count parameters from the shapes (see module doc for non-transformers)."""
        return self._param_counts

    @cached_property
    def _param_counts(self) -> ParamCounts:
        # Counted once per architecture: a plan's search asks for it about a thousand times.
        if not self.is_transformer:
            total = _layer_list_params(self)
            return ParamCounts(0, 0, 0, total, 0, 0, 1, total)
        h, spec = self.hidden_size, self.spec
        bias_all = spec.bias == "all"
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        if bias_all:
            attn += self.q_dim + 2 * self.kv_dim + h
        elif spec.bias == "qkv":
            attn += self.q_dim + 2 * self.kv_dim
        n_mats = 3 if self.gated_mlp else 2
        expert = n_mats * h * self.intermediate_size
        if bias_all:
            expert += (self.intermediate_size * (n_mats - 1)) + h
        experts = max(self.num_experts, 1)
        router = h * experts if self.is_moe else 0
        mlp = experts * expert + router
        active_mlp = (self.experts_per_token or 1) * expert + router if self.is_moe else mlp
        norm_params = NORM_TENSORS[self.norm_type] * h  # weight (+ bias)
        norms = norm_params * (1 if spec.one_norm_per_block(self.num_kv_heads) else 2)
        embedding = self.vocab_size * h
        if spec.learned_positions:
            embedding += self.max_position_embeddings * h
        if spec.token_types:
            embedding += 2 * h + norm_params  # token types + embedding LayerNorm
        lm_head = 0 if self.tie_word_embeddings else self.vocab_size * h
        if spec.lm_head_bias and lm_head:
            lm_head += self.vocab_size  # lm_head bias
        final_norm = 0 if spec.token_types else norm_params
        return ParamCounts(embedding, lm_head, attn, mlp, norms, final_norm, self.num_layers, active_mlp)

    @property
    def num_params(self) -> int:
        """``param_counts().total``: what ``sum(p.numel())`` gives."""
        return self.param_counts().total

    def to_dict(self) -> dict[str, Any]:
        """The catalog columns plus ``num_params`` (the model objects of the JSON documents)."""
        data = asdict(self)
        data["num_params"] = self.num_params
        return data


def _layer_list_params(arch: ModelArch) -> int:
    """A conv net's or diffusion model's parameters: the published count (``params_b``), else what
    gpuwise.vision's layer list of the same id counts, else 0 (nothing describes it)."""
    if arch.params_b is not None:
        return round(arch.params_b * 1e9)
    from gpuwise.vision.architectures import network, vision_arch

    described = vision_arch(arch.id)
    if described is None:
        return 0
    return network(described, described.image_size, described.image_size).params


def _int(value: Any) -> int:
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    return int(float(value))


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"yes", "true", "1", "y"}


def model_from_mapping(row: dict[str, Any], origin: str = "catalog") -> ModelArch:
    """Build from a catalog row or user entry (catalog column names)."""
    where = "" if origin == "catalog" else f"{origin}: "
    if not row.get("id"):
        raise GpuwiseError(f"{where}model entry is missing 'id'")
    mlp_type = parse_mlp_type(row.get("mlp_type"), where)
    family = str(row.get("family") or row["id"])
    if mlp_type not in NON_TRANSFORMER_TYPES:
        # A ViT has no vocabulary: its tokens are image patches.
        needed: tuple[str, ...] = ("hidden_size", "num_layers", "num_attention_heads")
        needed += () if family_spec(family, mlp_type).kind == "vit" else ("vocab_size",)
        for required in needed:
            if not _int(row.get(required)):
                raise GpuwiseError(f"{where}model {row['id']!r} is missing {required!r}")
    heads = _int(row.get("num_attention_heads"))
    hidden = _int(row.get("hidden_size"))
    params_b = row.get("params_b")
    return ModelArch(
        id=str(row["id"]).strip().lower(),
        family=family,
        hidden_size=hidden,
        num_layers=_int(row.get("num_layers")),
        num_attention_heads=heads,
        num_kv_heads=_int(row.get("num_kv_heads")) or heads,
        head_dim=_int(row.get("head_dim")) or (hidden // heads if heads else 0),
        intermediate_size=_int(row.get("intermediate_size")) or 4 * hidden,
        vocab_size=_int(row.get("vocab_size")),
        max_position_embeddings=_int(row.get("max_position_embeddings")),
        tie_word_embeddings=_flag(row.get("tie_word_embeddings", False)),
        mlp_type=mlp_type,
        num_experts=_int(row.get("num_experts")),
        experts_per_token=_int(row.get("experts_per_token")),
        norm_type=parse_norm_type(row.get("norm_type"), where),
        params_b=float(params_b) if params_b not in (None, "") else None,
        source=str(row.get("source") or ""),
        notes=str(row.get("notes") or ""),
        origin=origin,
    )


_HF_KEYS = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
}


def model_from_hf_config(path: Path) -> ModelArch:
    """Read a local Hugging Face ``config.json``; a missing required field is named."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise GpuwiseError(f"{path}: not a text file (expected a Hugging Face config.json)") from None
    except json.JSONDecodeError as err:
        raise GpuwiseError(
            f"{path}: invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    if not isinstance(config, dict):
        raise GpuwiseError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    if "text_config" in config and "hidden_size" not in config:
        config = {**config, **config["text_config"]}  # multimodal wrappers

    def pick(name: str) -> int:
        for key in _HF_KEYS[name]:
            if config.get(key):
                return int(config[key])
        raise GpuwiseError(f"{path}: config.json is missing {_HF_KEYS[name][0]!r} (needed to size the model)")

    hidden, layers, heads = pick("hidden_size"), pick("num_layers"), pick("num_attention_heads")
    spec = family_for_hf_model_type(str(config.get("model_type", "llama")), str(path))
    if "vocab_size" not in config:
        raise GpuwiseError(f"{path}: config.json is missing 'vocab_size'")
    num_experts = int(config.get("num_local_experts") or config.get("num_experts") or 0)
    kv = config.get("num_key_value_heads") or (1 if config.get("multi_query") else heads)
    return model_from_mapping(
        {
            "id": str(config.get("_name_or_path") or path.parent.name or path.stem).lower(),
            "family": spec.name,
            "hidden_size": hidden,
            "num_layers": layers,
            "num_attention_heads": heads,
            "num_kv_heads": kv,
            "head_dim": config.get("head_dim") or hidden // heads,
            "intermediate_size": config.get("intermediate_size")
            or config.get("n_inner")
            or config.get("ffn_hidden_size")
            or 4 * hidden,
            "vocab_size": config["vocab_size"],
            "max_position_embeddings": config.get("max_position_embeddings")
            or config.get("n_positions")
            or 0,
            "tie_word_embeddings": config.get("tie_word_embeddings", spec.hf_ties_embeddings),
            "mlp_type": _hf_mlp_type(spec, config, num_experts),
            "num_experts": num_experts,
            "experts_per_token": config.get("num_experts_per_tok") or 0,
            "norm_type": spec.hf_norm,
            "source": f"local config.json {path}",
        },
        origin=str(path),
    )


def _hf_mlp_type(spec: FamilySpec, config: dict[str, Any], num_experts: int) -> MlpType:
    """The family's MLP, made gated_gelu by a GELU ``hidden_act`` where the family says so (Llama
    configs), and an MoE whenever the config has more than one expert."""
    if num_experts > 1:
        return "gated_silu_moe"
    act = str(config.get("hidden_act") or config.get("hidden_activation") or "")
    return "gated_gelu" if spec.hf_act_decides_gate and "gelu" in act else spec.hf_mlp


@lru_cache(maxsize=1)
def _catalog() -> dict[str, ModelArch]:
    from gpuwise.catalog.user_files import load_catalog

    return load_catalog("models", model_from_mapping)


def list_models() -> list[ModelArch]:
    """Every catalog model: the bundled rows, then the user's files (a user entry replaces a bundled id)."""
    return list(_catalog().values())


def get_model(name: str) -> ModelArch:
    """A catalog id, a path to a local HF ``config.json`` (or a folder holding one), or a size
    ('13b', '70B', '8x7b': a generic decoder, see ``model_size``)."""
    key = name.strip().lower()
    catalog = _catalog()
    if key in catalog:
        return catalog[key]
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise GpuwiseError(f"model config {path} does not exist")
        return model_from_hf_config(path)
    sized = _model_of_size(key)
    if sized is not None:
        return sized
    raise did_you_mean(
        "model",
        name,
        catalog,
        hint="`gpuwise models` lists them; a path to a config.json or a size (13b, 8x7b) works too",
    )


@lru_cache(maxsize=64)
def _model_of_size(key: str) -> ModelArch | None:
    """'13b', '70B', '8x7b': a generic decoder of that size (cached: a plan asks many times)."""
    from gpuwise.catalog.model_size import model_for_size

    return model_for_size(key, list(_catalog().values()))


def is_vision_model(name: str) -> bool:
    """A catalog model that takes images: a conv net, a ViT, a diffusion model (no file is read)."""
    arch = _catalog().get(name.strip().lower())
    return arch is not None and (not arch.is_transformer or arch.spec.takes_images)


def native_image_size(name: str) -> int | None:
    """The resolution a vision/diffusion model is trained at (gpuwise.vision's data), if described."""
    from gpuwise.vision.architectures import vision_arch

    arch = vision_arch(name)
    return arch.image_size if arch else None


def clear_cache() -> None:
    """Forget the loaded catalog and the sized models, so changed user files (``GPUWISE_MODELS``) are read
    again."""
    _catalog.cache_clear()
    _model_of_size.cache_clear()
