"""The vision architectures of ``data/architectures.toml``, typed, and their networks at an image size."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any, Literal

from gpuwise.errors import GpuwiseError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib
from gpuwise.vision.cnn import ConvNeXtSpec, EfficientNetSpec, ResNetSpec, convnext, efficientnet, resnet
from gpuwise.vision.layers import Builder, Layer
from gpuwise.vision.transformer import DitSpec, MmditSpec, VitSpec, dit, mmdit, vit
from gpuwise.vision.unet import UNetSpec, VaeSpec, unet, vae_decoder

__all__ = [
    "Family",
    "Network",
    "Pipeline",
    "VisionArch",
    "described",
    "load_data",
    "network",
    "vae_network",
    "vision_arch",
]


# The builders of data/architectures.toml's ``family`` column. gpuwise.catalog.families registers each
# of them (kind, conventions) for the layers above; this table is only how to build its layer list.
Family = Literal["resnet", "efficientnet", "convnext", "vit", "dit", "mmdit", "unet"]


@dataclass(frozen=True)
class _Builder:
    """How to build one family: its spec dataclass, the builder, the smallest image side (px) its
    downsampling stages accept, and whether it denoises latents (a diffusion pipeline)."""

    spec_type: type
    build: Any
    smallest_px: int
    diffusion: bool = False


_BUILDERS: dict[str, _Builder] = {
    "resnet": _Builder(ResNetSpec, resnet, 32),
    "efficientnet": _Builder(EfficientNetSpec, efficientnet, 32),
    "convnext": _Builder(ConvNeXtSpec, convnext, 32),
    "vit": _Builder(VitSpec, vit, 16),
    "dit": _Builder(DitSpec, dit, 16, diffusion=True),
    "mmdit": _Builder(MmditSpec, mmdit, 16, diffusion=True),
    "unet": _Builder(UNetSpec, unet, 16, diffusion=True),
}


@dataclass(frozen=True)
class Pipeline:
    """Frozen parts and sampling defaults of a diffusion pipeline."""

    text_encoder_params: int = 0
    text_encoder_tokens: int = 77
    vae_params: int = 0
    vae_latent_channels: int = 4
    default_steps: int = 50
    cfg: bool = False  # classifier-free guidance: two denoiser passes (cond + uncond) per step


@dataclass(frozen=True)
class VisionArch:
    """A vision or diffusion architecture of data/architectures.toml: its builder family, native image size
    (px), the builder's spec, source and diffusion pipeline."""

    id: str
    family: Family
    image_size: int
    spec: Any
    source: str
    pipeline: Pipeline | None = None

    @property
    def is_diffusion(self) -> bool:
        """A denoiser of a diffusion pipeline (UNet, DiT, MMDiT) rather than a classifier or encoder."""
        return _BUILDERS[self.family].diffusion

    @property
    def kind(self) -> str:
        """Words for the user: what the analytic model walks."""
        return {
            "resnet": "ResNet bottleneck stages",
            "efficientnet": "EfficientNet MBConv stages",
            "convnext": "ConvNeXt stages",
            "vit": "ViT encoder blocks on patch tokens",
            "dit": "DiT blocks on latent patch tokens",
            "mmdit": "MMDiT double/single-stream blocks on latent + text tokens",
            "unet": "UNet down/mid/up blocks with attention at their resolutions",
        }[self.family]


@dataclass(frozen=True)
class Network:
    """A network's layers at one image size (per sample) and their totals."""

    arch: VisionArch
    height: int
    width: int
    layers: tuple[Layer, ...]
    block_inputs: dict[str, float]
    input_elements: float = 0.0  # per sample: 3·H·W pixels, or the latent for diffusion models

    @property
    def params(self) -> int:
        """Parameters of every layer (elements)."""
        return sum(layer.params for layer in self.layers)

    @property
    def macs(self) -> float:
        """Multiply-accumulates of one sample's forward (FLOPs = 2 × MACs)."""
        return sum(layer.macs for layer in self.layers)

    @property
    def has_attention(self) -> bool:
        """Whether any layer is attention (eager attention then keeps its scores)."""
        return any(layer.kind == "attention" for layer in self.layers)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@cache
def load_data(name: str) -> dict[str, Any]:
    """A TOML file of ``gpuwise/vision/data`` (package data)."""
    text = resources.files("gpuwise.vision").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _table() -> dict[str, dict[str, Any]]:
    return load_data("architectures.toml")


@cache
def vision_arch(model_id: str) -> VisionArch | None:
    """The description of a catalog model, or None when gpuwise.vision does not describe it."""
    row = _table().get(model_id.strip().lower())
    if row is None:
        return None
    spec = _BUILDERS[row["family"]].spec_type(**{k: _tuples(v) for k, v in row["spec"].items()})
    pipeline = Pipeline(**row["pipeline"]) if "pipeline" in row else None
    return VisionArch(model_id, row["family"], row["image_size"], spec, row["source"], pipeline)


def described() -> list[str]:
    """The catalog ids data/architectures.toml describes."""
    return list(_table())


@lru_cache(maxsize=256)
def network(arch: VisionArch, height: int, width: int) -> Network:
    """The layers of ``arch`` at ``height × width`` pixels (latent = pixels / 8 for diffusion models)."""
    build, smallest = _BUILDERS[arch.family].build, _BUILDERS[arch.family].smallest_px
    if min(height, width) < smallest:
        raise GpuwiseError(f"{arch.id} needs images of at least {smallest} px, got {height}×{width}")
    b: Builder = build(arch.spec, height, width)
    return Network(arch, height, width, tuple(b.layers), dict(b.block_inputs), b.input_elements)


@lru_cache(maxsize=64)
def vae_network(arch: VisionArch, height: int, width: int) -> Network:
    """The VAE decoder that turns the final latent into the image (diffusion inference)."""
    channels = arch.pipeline.vae_latent_channels if arch.pipeline else 4
    b = vae_decoder(VaeSpec(latent_channels=channels), height, width)
    return Network(arch, height, width, tuple(b.layers), dict(b.block_inputs), b.input_elements)
