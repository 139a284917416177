"""Latent-diffusion UNets (SD 1.5, SDXL) and the SD VAE decoder, from their diffusers configs.

The layer graph is diffusers' ``UNet2DConditionModel``: conv_in; down levels of ResNet blocks
(GroupNorm-SiLU-conv ×2, a time-embedding projection, a 1×1 shortcut when channels change) with
``Transformer2DModel``s (GroupNorm, proj_in, blocks of self-attention, cross-attention to the text
and a GEGLU MLP of width 4C, proj_out) at the levels that have attention; a mid block; up levels
with one more ResNet block each, fed the skip connections. The latent is image/8 (4 channels).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.vision.layers import Builder

__all__ = ["UNetSpec", "VaeSpec", "unet", "vae_decoder"]


@dataclass(frozen=True)
class UNetSpec:
    """A diffusers UNet2DConditionModel: channels, transformer layers and heads per level, mid block, text
    cross-attention width and tokens."""

    channels: tuple[int, ...]  # block_out_channels per level
    attention: tuple[int, ...]  # transformer layers per block at each level (0: no attention)
    heads: tuple[int, ...]  # attention heads at each level
    mid_layers: int  # transformer layers in the mid block
    cross_dim: int  # text embedding width
    text_tokens: int = 77
    layers_per_block: int = 2
    latent_channels: int = 4
    add_embed_dim: int = 0  # SDXL: pooled text + size/crop conditioning (2816)


@dataclass(frozen=True)
class VaeSpec:
    """The VAE decoder of a latent diffusion pipeline: channels per level, ResNet layers per block, latent
    channels."""

    channels: tuple[int, ...] = (128, 256, 512, 512)
    layers_per_block: int = 2
    latent_channels: int = 4


def _resnet(b: Builder, name: str, out: int, temb: int) -> None:
    in_ch, (h, w) = b.channels, (b.height, b.width)
    b.start_block(name)
    b.norm(name + ".norm1", "gn", "silu")
    b.conv(name + ".conv1", out, 3, bias=True)
    if temb:
        b.add(name + ".time_emb_proj", "linear", temb * out + out, float(temb * out), 0.0)
    b.norm(name + ".norm2", "gn", "silu")
    b.conv(name + ".conv2", out, 3, bias=True)
    if in_ch != out:  # 1×1 shortcut on the block input; its output only feeds the residual add
        b.add(name + ".shortcut", "conv", in_ch * out + out, float(h * w * in_ch * out), 0.0)


def _spatial_transformer(b: Builder, name: str, layers: int, heads: int, spec: UNetSpec) -> None:
    """Transformer2DModel on the h·w tokens of a C-channel feature map (see transformer.block for counts)."""
    d, t, s, ctx = b.channels, float(b.height * b.width), float(spec.text_tokens), spec.cross_dim
    f = 4 * d
    b.start_block(name)
    b.norm(name + ".norm", "gn")
    b.add(name + ".proj_in", "linear", d * d + d, t * d * d, 0.0)
    for i in range(layers):
        n = f"{name}.{i}"
        b.start_block(n, t * d)
        b.add(n + ".norm1", "norm", 2 * d, 0.0, t * d, saved_fp32=t * d)
        b.add(n + ".attn1.qkv", "linear", 3 * d * d, t * 3 * d * d, t * d, ((d, d),) * 3)
        b.add(n + ".attn1", "attention", 0, 2.0 * t * t * d, 4.0 * t * d, output=t * d, scores=heads * t * t)
        b.add(n + ".attn1.out", "linear", d * d + d, t * d * d, 0.0, ((d, d),))
        b.add(n + ".norm2", "norm", 2 * d, 0.0, t * d, saved_fp32=t * d)
        b.add(n + ".attn2.q", "linear", d * d, t * d * d, t * d, ((d, d),))
        b.add(n + ".attn2.kv", "linear", 2 * ctx * d, 2.0 * s * ctx * d, 0.0, ((ctx, d),) * 2)
        b.add(
            n + ".attn2",
            "attention",
            0,
            2.0 * t * s * d,
            2.0 * t * d + 2.0 * s * d,
            output=t * d,
            scores=heads * t * s,
        )
        b.add(n + ".attn2.out", "linear", d * d + d, t * d * d, 0.0, ((d, d),))
        b.add(n + ".norm3", "norm", 2 * d, 0.0, t * d, saved_fp32=t * d)
        # GEGLU: proj to 2f (hidden, gate), GELU(gate), product → out; keeps d + 2f + f + f.
        b.add(n + ".ff.proj", "linear", d * 2 * f + 2 * f, t * d * 2 * f, t * (d + 2 * f), output=t * 2 * f)
        b.add(n + ".ff.out", "linear", f * d + d, t * f * d, t * 2 * f, output=t * d)
    b.block = name
    b.add(name + ".proj_out", "linear", d * d + d, t * d * d, 2.0 * t * d)


def unet(spec: UNetSpec, height: int, width: int) -> Builder:
    """The layers of a UNet on the latent of a ``height`` × ``width`` px image (pixels / 8): down, mid and
    up blocks."""
    c0 = spec.channels[0]
    temb = 4 * c0
    b = Builder(spec.latent_channels, max(height // 8, 8), max(width // 8, 8))
    b.conv("conv_in", c0, 3, bias=True)
    embed = c0 * temb + temb + temb * temb + temb
    if spec.add_embed_dim:
        embed += spec.add_embed_dim * temb + temb + temb * temb + temb
    b.add("time_embedding", "linear", embed, float(embed), 0.0)
    skips = [b.channels]
    levels = len(spec.channels)
    for level, out in enumerate(spec.channels):
        for i in range(spec.layers_per_block):
            _resnet(b, f"down.{level}.res{i}", out, temb)
            if spec.attention[level]:
                _spatial_transformer(
                    b, f"down.{level}.attn{i}", spec.attention[level], spec.heads[level], spec
                )
            skips.append(b.channels)
        if level < levels - 1:
            b.start_block(f"down.{level}.downsample")
            b.conv(f"down.{level}.downsample", out, 3, stride=2, bias=True)
            skips.append(b.channels)
    top = spec.channels[-1]
    _resnet(b, "mid.res0", top, temb)
    _spatial_transformer(b, "mid.attn", spec.mid_layers, spec.heads[-1], spec)
    _resnet(b, "mid.res1", top, temb)
    for level in reversed(range(levels)):
        out = spec.channels[level]
        for i in range(spec.layers_per_block + 1):
            skip = skips.pop()
            b.channels += skip  # concatenation: a new tensor the next GroupNorm keeps
            b.add(f"up.{level}.cat{i}", "pool", 0, 0.0, b.elements)
            _resnet(b, f"up.{level}.res{i}", out, temb)
            if spec.attention[level]:
                _spatial_transformer(b, f"up.{level}.attn{i}", spec.attention[level], spec.heads[level], spec)
        if level > 0:
            _upsample(b, f"up.{level}.upsample")
    b.norm("conv_norm_out", "gn", "silu")
    b.conv("conv_out", spec.latent_channels, 3, bias=True)
    return b


def _upsample(b: Builder, name: str) -> None:
    """Nearest 2× then a 3×3 conv, which keeps the upsampled input."""
    b.start_block(name)
    b.height, b.width = 2 * b.height, 2 * b.width
    b.add(name + ".interpolate", "pool", 0, 0.0, b.elements)
    b.conv(name, b.channels, 3, bias=True)


def vae_decoder(spec: VaeSpec, height: int, width: int) -> Builder:
    """SD VAE decoder: latent (image/8) → image; one single-head attention at the latent resolution."""
    top = spec.channels[-1]
    b = Builder(spec.latent_channels, max(height // 8, 1), max(width // 8, 1))
    b.conv("post_quant_conv", spec.latent_channels, 1, bias=True)
    b.conv("conv_in", top, 3, bias=True)
    _resnet(b, "mid.res0", top, 0)
    t = float(b.height * b.width)
    b.norm("mid.attn.norm", "gn")
    b.add("mid.attn.qkv", "linear", 3 * (top * top + top), t * 3 * top * top, t * top)
    b.add("mid.attn", "attention", 0, 2.0 * t * t * top, 4.0 * t * top, output=t * top, scores=t * t)
    b.add("mid.attn.out", "linear", top * top + top, t * top * top, t * top)
    _resnet(b, "mid.res1", top, 0)
    for level, out in enumerate(reversed(spec.channels)):
        for i in range(spec.layers_per_block + 1):
            _resnet(b, f"up.{level}.res{i}", out, 0)
        if level < len(spec.channels) - 1:
            _upsample(b, f"up.{level}.upsample")
    b.norm("conv_norm_out", "gn", "silu")
    b.conv("conv_out", 3, 3, bias=True)
    return b
