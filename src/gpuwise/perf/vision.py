"""Throughput of vision and diffusion workloads: FLOPs from the layer list × a sourced efficiency.

FLOPs = 2 × MACs of ``architectures.network``. Training = 3× the forward (forward, input and weight
gradients; LoRA skips the frozen weights' gradients: 2×; full checkpointing adds a forward).
Diffusion inference per image = steps × (2 with classifier-free guidance) denoiser passes + the VAE
decoder + the text encoders once (2 × parameters × tokens). The fractions of peak are in
``data/efficiency.toml`` (conv nets: ``perf/data/efficiency.toml [cnn]``), each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuwise.catalog import GPU, ModelArch
from gpuwise.catalog.families import family_spec
from gpuwise.errors import GpuwiseError
from gpuwise.memory.vision import image_dims
from gpuwise.perf import efficiency as eff
from gpuwise.perf.flops import TrainingFlops
from gpuwise.vision.architectures import VisionArch, load_data, network, vae_network, vision_arch
from gpuwise.workload import Workload

__all__ = [
    "Fraction",
    "Kind",
    "compute_dtype",
    "described",
    "forward_flops",
    "fraction",
    "inference_flops_per_image",
    "steps",
    "training_flops",
    "vision_assumptions",
]


Kind = Literal["training", "inference"]


@dataclass(frozen=True)
class Fraction:
    """A share of the dense peak (0-1) a vision workload's kernels reach, and the sources it rests on."""

    value: float
    reason: str


def _table() -> dict[str, dict[str, float]]:
    return load_data("efficiency.toml")


def forward_flops(w: Workload, arch: VisionArch) -> float:
    """FLOPs of one forward of one sample through the trained/served network."""
    height, width = image_dims(w)
    return 2.0 * network(arch, height, width).macs


def training_flops(w: Workload, arch: VisionArch) -> TrainingFlops:
    """One micro-batch of one replica (``tokens`` = images)."""
    fwd = forward_flops(w, arch) * w.batch_size
    passes = 2.0 if w.is_lora else 3.0
    recompute = fwd if w.grad_checkpointing != "none" else 0.0
    return TrainingFlops(w.batch_size, passes * fwd, 0.0, recompute, 0.0)


def steps(w: Workload, arch: VisionArch) -> int:
    """Denoising steps per image: the workload's, else the pipeline's default (1 for a classifier)."""
    pipe = arch.pipeline
    return w.denoising_steps or (pipe.default_steps if pipe else 1)


def inference_flops_per_image(w: Workload, arch: VisionArch) -> float:
    """Everything one image costs at inference (diffusion: the whole sampling loop)."""
    pipe = arch.pipeline
    if pipe is None:
        return forward_flops(w, arch)
    height, width = image_dims(w)
    passes = steps(w, arch) * (2 if pipe.cfg else 1)
    vae = 2.0 * vae_network(arch, height, width).macs
    text = 2.0 * pipe.text_encoder_params * pipe.text_encoder_tokens
    return passes * forward_flops(w, arch) + vae + text


def fraction(w: Workload, arch: VisionArch, kind: Kind) -> Fraction:
    """Share of the peak this workload's kernels reach, and why."""
    sixteen_bit = w.precision not in ("fp32",)
    if arch.is_diffusion:
        table = _table()["diffusion"]
        value = table[f"{kind}_fraction"]
        why = [f"diffusion {kind}: {value:.0%} of peak (diffusers SDXL on A100, data/efficiency.toml)"]
        if kind == "inference" and w.precision in ("fp8", "int8"):
            value = table["eight_bit_inference_fraction"]
            why = [
                f"8-bit diffusion inference: {value:.0%} of the 8-bit peak "
                "(MLPerf SDXL, data/efficiency.toml)"
            ]
        if w.attention == "eager":
            value *= table["eager_attention_factor"]
            why.append(f"eager attention ×{table['eager_attention_factor']}")
        if w.channels_last and not family_spec(arch.family).token_transformer and sixteen_bit:  # a UNet
            value *= table["channels_last_speedup"]
            why.append(f"channels_last + torch.compile ×{table['channels_last_speedup']}")
        return Fraction(value, "; ".join(why))
    value = eff.cnn_fraction(kind)
    why = [f"conv net {kind}: {value:.0%} of peak (perf/data/efficiency.toml [cnn], NHWC reference runs)"]
    if kind == "training" and sixteen_bit and not w.channels_last:
        speedup = _table()["conv"]["channels_last_speedup"]
        value /= speedup
        why.append(f"NCHW (no channels_last) ÷{speedup}")
    if family_spec(arch.family).depthwise_convs:
        why.append("depthwise convolutions are memory-bound: expect less than this")
    return Fraction(value, "; ".join(why))


def compute_dtype(w: Workload, gpu: GPU) -> str | None:
    """fp32 convolutions run in TF32 on Ampere and newer (cuDNN's default ``allow_tf32``)."""
    return "tf32" if w.precision == "fp32" and gpu.tf32_tflops else None


def described(model_id: str) -> VisionArch:
    """The description the performance model needs, or one clear line naming the way out."""
    arch = vision_arch(model_id)
    if arch is None:
        raise GpuwiseError(
            f"no layer list for {model_id}: gpuwise predicts transformers and the vision/diffusion models "
            "of gpuwise/vision/data/architectures.toml (add it there, or measure it: gpuwise profile)"
        )
    return arch


def vision_assumptions(w: Workload, model: ModelArch) -> list[str]:
    """What an inference prediction of a vision/diffusion model rests on, for the user."""
    arch = described(model.id)
    height, width = image_dims(w)
    lines = [
        f"analytic vision model: {arch.kind} at {height}×{width} px, "
        f"{forward_flops(w, arch) / 1e9:,.1f} GFLOPs per forward; throughput in images/s",
        fraction(w, arch, "inference").reason,
    ]
    pipe = arch.pipeline
    if pipe is not None:
        passes = "2 passes (classifier-free guidance)" if pipe.cfg else "1 pass (guidance-distilled)"
        lines.append(
            f"{steps(w, arch)} denoising steps × {passes} + the VAE decoder + the text encoders: "
            f"{inference_flops_per_image(w, arch) / 1e12:,.1f} TFLOPs per image"
        )
    return lines
