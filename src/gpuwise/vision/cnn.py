"""Convolutional networks: ResNet (bottleneck), EfficientNet (MBConv, compound scaling), ConvNeXt.

Each builder turns a description from ``architectures.toml`` and an image size into ``Layer``s;
the layer graphs are those of the papers (He et al. 2015 Table 1 with torchvision's v1.5 stride on
the 3×3; Tan & Le 2019 Table 1; Liu et al. 2022 Fig. 4), so parameters and MACs come out of the
shapes, not from a table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuwise.vision.layers import Builder

__all__ = ["ConvNeXtSpec", "EfficientNetSpec", "ResNetSpec", "convnext", "efficientnet", "resnet"]


@dataclass(frozen=True)
class ResNetSpec:
    """A ResNet: bottleneck blocks per stage and their 3×3 widths (outputs 4× wider), classifier classes."""

    depths: tuple[int, ...]  # bottleneck blocks per stage
    widths: tuple[int, ...]  # bottleneck (3×3) widths; outputs are 4× wider
    classes: int = 1000


@dataclass(frozen=True)
class EfficientNetSpec:
    """An EfficientNet: B0's MBConv stages scaled by width and depth multipliers, stem width, classes."""

    # Per stage of B0: (expand ratio, kernel, stride, output channels, repeats)
    stages: tuple[tuple[int, int, int, int, int], ...]
    width_mult: float
    depth_mult: float
    stem: int = 32
    classes: int = 1000


@dataclass(frozen=True)
class ConvNeXtSpec:
    """A ConvNeXt: blocks and channels per stage, classifier classes."""

    depths: tuple[int, ...]
    widths: tuple[int, ...]
    classes: int = 1000


def resnet(spec: ResNetSpec, height: int, width: int) -> Builder:
    """The layers of a ResNet on ``height`` × ``width`` px images (torchvision's layout: stem, bottleneck
    stages, head)."""
    b = Builder(3, height, width)
    b.conv("stem.conv", 64, 7, stride=2, norm="bn", act="relu")
    b.pool("stem.maxpool", 3, 2)
    for stage, (depth, mid) in enumerate(zip(spec.depths, spec.widths, strict=True)):
        for i in range(depth):
            stride = 2 if i == 0 and stage > 0 else 1
            name = f"layer{stage + 1}.{i}"
            b.start_block(name)
            shape = (b.channels, b.height, b.width)
            b.conv(name + ".conv1", mid, 1, norm="bn", act="relu")
            b.conv(name + ".conv2", mid, 3, stride=stride, norm="bn", act="relu")
            b.conv(name + ".conv3", 4 * mid, 1, norm="bn", act="relu")  # ReLU after the residual add
            if stride != 1 or shape[0] != 4 * mid:  # projection shortcut
                out = (b.channels, b.height, b.width)
                b.channels, b.height, b.width = shape
                b.conv(name + ".downsample", 4 * mid, 1, stride=stride, norm="bn")
                # Its BatchNorm output only feeds the residual add: the norm's input is all it keeps.
                b.layers[-1] = replace(b.layers[-1], saved=b.elements)
                b.channels, b.height, b.width = out
    _classifier(b, spec.classes, norm=False)
    return b


def _make_divisible(value: float, divisor: int = 8) -> int:
    """Channel rounding of the reference EfficientNet code: nearest multiple of 8, never 10 % below."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def efficientnet(spec: EfficientNetSpec, height: int, width: int) -> Builder:
    """The layers of an EfficientNet on ``height`` × ``width`` px images (torchvision's MBConv blocks with
    squeeze-excitation)."""
    b = Builder(3, height, width)
    b.conv("stem", _make_divisible(spec.stem * spec.width_mult), 3, stride=2, norm="bn", act="silu")
    for stage, (expand, kernel, stride, out, repeats) in enumerate(spec.stages):
        out_ch = _make_divisible(out * spec.width_mult)
        for i in range(math.ceil(repeats * spec.depth_mult)):
            name = f"stage{stage + 1}.{i}"
            b.start_block(name)
            in_ch = b.channels
            hidden = _make_divisible(in_ch * expand)
            if expand != 1:
                b.conv(name + ".expand", hidden, 1, norm="bn", act="silu")
            b.conv(
                name + ".dw",
                hidden,
                kernel,
                stride=stride if i == 0 else 1,
                groups=hidden,
                norm="bn",
                act="silu",
            )
            squeeze = max(1, in_ch // 4)
            # Squeeze-excitation: two 1×1 convs on the pooled vector; the gated product is kept for project.
            se_params = 2 * hidden * squeeze + squeeze + hidden
            b.add(name + ".se", "linear", se_params, float(2 * hidden * squeeze), b.elements)
            b.conv(name + ".project", out_ch, 1, norm="bn")
    head = 4 * _make_divisible(320 * spec.width_mult)
    b.conv("head", head, 1, norm="bn", act="silu")
    _classifier(b, spec.classes, norm=False)
    return b


def convnext(spec: ConvNeXtSpec, height: int, width: int) -> Builder:
    """The layers of a ConvNeXt on ``height`` × ``width`` px images (patchify stem, depthwise 7×7 blocks,
    downsampling between stages)."""
    b = Builder(3, height, width)
    b.conv("stem", spec.widths[0], 4, stride=4, bias=True, norm="ln", padding=0)
    for stage, (depth, dim) in enumerate(zip(spec.depths, spec.widths, strict=True)):
        if stage > 0:
            b.norm(f"downsample{stage}.norm", "ln")
            b.conv(f"downsample{stage}", dim, 2, stride=2, bias=True, padding=0)
        for i in range(depth):
            name = f"stage{stage + 1}.{i}"
            b.start_block(name)
            tokens = b.height * b.width
            h, w = b.height, b.width
            b.conv(name + ".dwconv", dim, 7, groups=dim, bias=True, norm="ln")
            b.linear(name + ".pwconv1", tokens, dim, 4 * dim, act="gelu")
            b.linear(name + ".pwconv2", tokens, 4 * dim, dim)
            b.add(name + ".gamma", "linear", dim, 0.0, 0.0)  # layer scale: kept input counted above
            b.channels, b.height, b.width = dim, h, w
    _classifier(b, spec.classes, norm=True)
    return b


def _classifier(b: Builder, classes: int, norm: bool) -> None:
    """Global average pool, (LayerNorm,) linear head."""
    b.start_block("head")
    channels = b.channels
    b.channels, b.height, b.width = channels, 1, 1
    if norm:
        b.norm("head.norm", "ln")
    b.linear("head.fc", 1, channels, classes)
