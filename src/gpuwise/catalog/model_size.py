"""A model given by its size ("13b", "70B", "8x7b", "7B MoE 8x7b"): a generic Llama-shaped decoder.

Users often know only the size. The shape follows a rule fitted to the Llama 3 family
(Llama 3.2-1B, 3.2-3B, 3.1-8B, 3.1-70B; Hugging Face config.json values in models.csv):

- hidden = 2048 x P^(1/3) (P in billions), rounded to a multiple of 1024 from 4B up (256 below):
  exact for 1B, 3B, 8B and 70B; 13B gets Llama-2-13B's 5120; 405B gets 15360 (real: 16384);
- head_dim 128, heads = hidden / 128, 8 KV heads (grouped-query attention, as Llama 3);
- intermediate = 3.5 x hidden (rounded to 256; 8B and 70B exact), SwiGLU; vocabulary 128,256;
  embeddings tied below 4B (as Llama 3.2-1B/3B), untied above;
- layers: as many as bring the parameter count to P (8B -> 32, 70B -> 79; real 32 and 80; small
  models get fewer, wider-FFN layers than Llama 3.2: 1B -> 13 vs 16).

"ExN" is a Mixtral-style mixture of experts: the N-billion dense shape with E experts in every
MLP and 2 routed per token (Mixtral 8x7B: 46.7B total, 12.9B active).
"""

from __future__ import annotations

import math
import re

from gpuwise.catalog.models import ModelArch, model_from_mapping

__all__ = ["generic_shape", "model_for_size", "nearest_catalog_models", "parse_size", "tied_embeddings"]


_VOCAB = 128_256
_HEAD_DIM = 128
_KV_HEADS = 8
_MOE_TOP_K = 2  # Mixtral routes each token to 2 of its 8 experts
_SIZE = r"(\d+(?:\.\d+)?)\s*b"
_MOE = re.compile(rf"(\d+)\s*x\s*{_SIZE}")
_DENSE = re.compile(_SIZE)
_WORDS = {"moe", "dense", "generic", "model", "llm", "decoder"}
_MIN_B, _MAX_B = 0.5, 2000.0


def parse_size(text: str) -> tuple[float, int] | None:
    """(billions per expert, experts) for '13b', '70B', '8x7b', '7B MoE 8x7b'; None if not a size."""
    s = text.strip().lower().replace("_", " ").replace("-", " ")
    moe = _MOE.search(s)
    if moe:
        rest = s[: moe.start()] + s[moe.end() :]
        rest = _DENSE.sub("", rest)  # '7B MoE 8x7b': the leading size restates the expert size
        experts, size = int(moe.group(1)), float(moe.group(2))
    else:
        dense = _DENSE.fullmatch(s.split()[0]) if s.split() else None
        if dense is None:
            return None
        rest, experts, size = s[dense.end() :], 1, float(dense.group(1))
    if set(rest.split()) - _WORDS:
        return None
    return size, experts


def _round(x: float, step: int) -> int:
    return max(step, round(x / step) * step)


def _per_layer(hidden: int, kv_heads: int, ffn: int) -> int:
    attention = 2 * hidden * hidden + 2 * hidden * kv_heads * _HEAD_DIM
    return attention + 3 * hidden * ffn + 2 * hidden


def tied_embeddings(params_b: float) -> bool:
    """Whether a generic decoder of ``params_b`` billion parameters ties its embeddings (Llama 3.2-1B/3B
    do, 8B and up do not)."""
    return params_b < 4


def generic_shape(params_b: float) -> dict[str, int]:
    """Llama-3-like hidden/heads/FFN/layers for a dense decoder of ``params_b`` billion parameters."""
    hidden = _round(2048 * params_b ** (1 / 3), 1024 if params_b >= 4 else 256)
    heads = hidden // _HEAD_DIM
    kv = _KV_HEADS if heads % _KV_HEADS == 0 else math.gcd(heads, _KV_HEADS)
    ffn = _round(3.5 * hidden, 256)
    body = params_b * 1e9 - (1 if tied_embeddings(params_b) else 2) * _VOCAB * hidden
    layers = max(2, round(body / _per_layer(hidden, kv, ffn)))
    return {
        "hidden_size": hidden,
        "num_layers": layers,
        "num_attention_heads": heads,
        "num_kv_heads": kv,
        "intermediate_size": ffn,
    }


def nearest_catalog_models(params_b: float, models: list[ModelArch], count: int = 3) -> list[ModelArch]:
    """The ``count`` catalog decoders closest in size to ``params_b`` billion (log-ratio), named next to a
    generic model so the user can pick a real one."""
    decoders = [m for m in models if m.is_decoder and m.num_params > 0]
    return sorted(decoders, key=lambda m: abs(math.log(m.num_params / 1e9 / params_b)))[:count]


def model_for_size(text: str, models: list[ModelArch]) -> ModelArch | None:
    """A generic decoder for a size string, or None when ``text`` is not one."""
    parsed = parse_size(text)
    if parsed is None:
        return None
    size, experts = parsed
    from gpuwise.errors import GpuwiseError

    if not _MIN_B <= size <= _MAX_B or not 1 <= experts <= 256:
        raise GpuwiseError(
            f"model size {text!r} is out of range: give {_MIN_B:g}b to {_MAX_B:g}b (and at most 256 experts)"
        )
    shape = generic_shape(size)
    moe = experts > 1
    label = f"{experts}x{size:g}b" if moe else f"{size:g}b"
    arch = model_from_mapping(
        {
            "id": f"generic-{label}",
            "family": "llama",
            **shape,
            "head_dim": _HEAD_DIM,
            "vocab_size": _VOCAB,
            "max_position_embeddings": 8192,
            "tie_word_embeddings": tied_embeddings(size),
            "mlp_type": "gated_silu_moe" if moe else "gated_silu",
            "num_experts": experts if moe else 0,
            "experts_per_token": _MOE_TOP_K if moe else 0,
            "source": "gpuwise generic decoder (catalog/model_size.py rule fitted to Llama 3 shapes)",
        },
        origin="size",
    )
    total = arch.num_params / 1e9
    nearest = ", ".join(f"{m.id} ({m.num_params / 1e9:,.1f}B)" for m in nearest_catalog_models(total, models))
    moe_text = f", {experts} experts with {_MOE_TOP_K} routed per token" if moe else ""
    note = (
        f"'{text}' is not a catalog model: assumed a generic Llama-3-shaped decoder of {total:,.1f}B "
        f"parameters (hidden {shape['hidden_size']}, {shape['num_layers']} layers, "
        f"{shape['num_attention_heads']} heads / {shape['num_kv_heads']} KV, FFN {shape['intermediate_size']}"
        f"{moe_text}, vocab {_VOCAB:,}); nearest catalog models: {nearest}"
    )
    return model_from_mapping({**arch.to_dict(), "notes": note}, origin="size")
