"""Transformer blocks on image tokens: ViT / CLIP encoders, DiT, Flux-class MMDiT, UNet attention.

Tokens: a ViT at ``H×W`` with patch ``p`` sees ``(H/p)·(W/p)`` patches (+ [CLS]); a latent DiT sees
``(H/8/p)·(W/8/p)`` (SD VAEs downsample 8×). Saved activations per token of a pre-LN block with
width d and MLP width f (pure 16-bit; autocast keeps the two LayerNorm inputs in fp32):
LN input d, qkv input d, q/k/v/output 4d, LN input d, fc1 input d, GELU input f, fc2 input f
= 8d + 2f — Korthikanti et al. 2022 (arXiv:2205.05198) §4.1 without dropout masks and with SDPA.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.vision.layers import Builder

__all__ = ["DitSpec", "MmditSpec", "VitSpec", "block", "dit", "latent_tokens", "mmdit", "vit"]


@dataclass(frozen=True)
class VitSpec:
    """A ViT (or CLIP's vision tower): width, depth, heads, MLP width, patch size, classes (0: encoder
    only)."""

    width: int
    depth: int
    heads: int
    mlp: int
    patch: int
    classes: int = 0  # 0: encoder only (no classification head)
    cls_token: bool = True
    clip: bool = False  # CLIP vision tower: bias-free patch conv, ln_pre, projection to embed_dim
    embed_dim: int = 0


@dataclass(frozen=True)
class DitSpec:
    """A DiT: width, depth, heads, patch size on the latent, latent channels, MLP ratio, label classes."""

    width: int
    depth: int
    heads: int
    patch: int
    latent_channels: int = 4
    mlp_ratio: int = 4
    classes: int = 1000  # DiT's label embedding (+1 for the null class)


@dataclass(frozen=True)
class MmditSpec:
    """An MMDiT (Flux): width, double-stream and single-stream blocks, heads, latent channels and patch
    size."""

    width: int
    double_blocks: int
    single_blocks: int
    heads: int
    latent_channels: int = 16
    patch: int = 2
    mlp_ratio: int = 4
    text_tokens: int = 512
    text_width: int = 4096  # T5-XXL hidden size
    pooled_width: int = 768  # CLIP-L pooled embedding
    guidance_embed: bool = True


def block(
    b: Builder,
    name: str,
    tokens: int,
    d: int,
    heads: int,
    mlp: int,
    *,
    keys: int | None = None,
    modulated: bool = False,
    qk_norm: bool = False,
    qkv_bias: bool = True,
) -> None:
    """One pre-LN self-attention + MLP block on ``tokens`` tokens (``keys`` for joint attention)."""
    t, s = float(tokens), float(keys or tokens)
    b.start_block(name, t * d)
    extra = (
        2.0 * d if modulated else 0.0
    )  # modulate keeps the norm output; the gate keeps the sublayer output
    norm_params = 0 if modulated else 2 * d
    b.add(
        name + ".norm1",
        "norm",
        norm_params,
        0.0,
        t * (d + extra / 2),
        saved_fp32=t * d * (2 if modulated else 1),
    )
    b.add(
        name + ".qkv", "linear", 3 * d * d + (3 * d if qkv_bias else 0), t * 3 * d * d, t * d, ((d, d),) * 3
    )
    if qk_norm:
        b.add(name + ".qk_norm", "norm", 2 * (d // heads), 0.0, t * 2 * d, saved_fp32=t * 2 * d)
    b.add(
        name + ".attn",
        "attention",
        0,
        2.0 * t * s * d,
        4.0 * t * d,  # q and output, this stream's k and v
        output=t * d,
        scores=heads * t * s,
    )
    b.add(name + ".proj", "linear", d * d + d, t * d * d, t * extra / 2, ((d, d),))
    b.add(
        name + ".norm2",
        "norm",
        norm_params,
        0.0,
        t * (d + extra / 2),
        saved_fp32=t * d * (2 if modulated else 1),
    )
    b.add(name + ".fc1", "linear", d * mlp + mlp, t * d * mlp, t * (d + mlp), output=t * mlp)
    b.add(name + ".fc2", "linear", mlp * d + d, t * mlp * d, t * (mlp + extra / 2), output=t * d)
    b.channels, b.height, b.width = d, tokens, 1


def vit(spec: VitSpec, height: int, width: int) -> Builder:
    """The layers of a ViT on ``height`` × ``width`` px images: patch embedding, encoder blocks on patch
    tokens, optional head."""
    d, p = spec.width, spec.patch
    b = Builder(3, height, width)
    b.conv("patch_embed", d, p, stride=p, bias=not spec.clip, padding=0)
    tokens = b.height * b.width + (1 if spec.cls_token else 0)
    b.add("pos_embed", "linear", tokens * d + (d if spec.cls_token else 0), 0.0, 0.0)
    if spec.clip:
        b.channels, b.height, b.width = d, tokens, 1
        b.norm("ln_pre", "ln")
    for i in range(spec.depth):
        block(b, f"blocks.{i}", tokens, d, spec.heads, spec.mlp)
    b.start_block("head", float(tokens * d))
    b.norm("norm", "ln")
    if spec.clip and spec.embed_dim:
        b.linear("proj", 1, d, spec.embed_dim, bias=False)
    if spec.classes:
        b.linear("head", 1, d, spec.classes)
    return b


def latent_tokens(height: int, width: int, patch: int) -> tuple[int, int]:
    """Latent grid of an SD-family VAE (8× downsampling) cut into ``patch``×``patch`` tokens."""
    return max(height // 8 // patch, 1), max(width // 8 // patch, 1)


def dit(spec: DitSpec, height: int, width: int) -> Builder:
    """The layers of a DiT on the latent of a ``height`` × ``width`` px image (pixels / 8)."""
    d, p = spec.width, spec.patch
    b = Builder(spec.latent_channels, max(height // 8, p), max(width // 8, p))
    b.conv("x_embed", d, p, stride=p, bias=True, padding=0)
    tokens = b.height * b.width
    # Timestep MLP (256-d sinusoid → d → d) and the label table; the position table is fixed (sin-cos).
    b.add("t_embed", "linear", 256 * d + d + d * d + d + (spec.classes + 1) * d, float(256 * d + d * d), 0.0)
    for i in range(spec.depth):
        b.add(f"blocks.{i}.adaLN", "linear", d * 6 * d + 6 * d, float(6 * d * d), 0.0)
        block(b, f"blocks.{i}", tokens, d, spec.heads, spec.mlp_ratio * d, modulated=True)
    out = p * p * spec.latent_channels * 2  # learned sigma: twice the latent channels
    b.add("final.adaLN", "linear", d * 2 * d + 2 * d, float(2 * d * d), 0.0)
    b.linear("final.linear", tokens, d, out)
    return b


def mmdit(spec: MmditSpec, height: int, width: int) -> Builder:
    """Flux-class: double-stream blocks (image and text weights, joint attention), then single-stream."""
    d, p = spec.width, spec.patch
    rows, cols = latent_tokens(height, width, p)
    img, txt = rows * cols, spec.text_tokens
    both = img + txt
    b = Builder(spec.latent_channels * p * p, img, 1)
    b.linear("img_in", img, spec.latent_channels * p * p, d)
    b.add(
        "txt_in",
        "linear",
        spec.text_width * d + d,
        float(txt * spec.text_width * d),
        float(txt * spec.text_width),
    )
    vectors = 2 + (1 if spec.guidance_embed else 0)  # time, pooled text, guidance MLPs (in → d → d)
    emb = vectors * (d * d + d) + (vectors - 1) * (256 * d + d) + spec.pooled_width * d + d
    b.add("vector_in", "linear", emb, float(emb), 0.0)
    f = spec.mlp_ratio * d
    for i in range(spec.double_blocks):
        b.add(f"double.{i}.mod", "linear", 2 * (d * 6 * d + 6 * d), float(12 * d * d), 0.0)
        # Image and text streams each run a modulated block; attention spans both token sets.
        block(b, f"double.{i}.img", img, d, spec.heads, f, keys=both, modulated=True, qk_norm=True)
        block(b, f"double.{i}.txt", txt, d, spec.heads, f, keys=both, modulated=True, qk_norm=True)
        b.block = f"double.{i}.img"  # one checkpoint unit per double block
    for i in range(spec.single_blocks):
        name = f"single.{i}"
        t = float(both)
        b.start_block(name, t * d)
        b.add(name + ".mod", "linear", d * 3 * d + 3 * d, float(3 * d * d), 0.0)
        b.add(name + ".norm", "norm", 0, 0.0, 2 * t * d, saved_fp32=2 * t * d)
        b.add(
            name + ".linear1",
            "linear",
            d * (3 * d + f) + 3 * d + f,
            t * d * (3 * d + f),
            t * d,
            ((d, d),) * 3,
        )
        b.add(name + ".qk_norm", "norm", 2 * (d // spec.heads), 0.0, 2 * t * d, saved_fp32=2 * t * d)
        b.add(
            name + ".attn",
            "attention",
            0,
            2.0 * t * t * d,
            4.0 * t * d,
            output=t * d,
            scores=spec.heads * t * t,
        )
        b.add(
            name + ".linear2", "linear", (d + f) * d + d, t * (d + f) * d, t * (2 * f + d + d), output=t * d
        )
    b.add("final.adaLN", "linear", d * 2 * d + 2 * d, float(2 * d * d), 0.0)
    b.linear("final.linear", img, d, spec.latent_channels * p * p)
    return b
