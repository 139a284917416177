"""Throughput of vision and diffusion workloads: FLOPs from the layer list at a sourced tensor-core
fraction, plus the memory-bound bytes of their feature maps at the GPU's bandwidth, bounded below by the
eager host time (diffusion).

FLOPs = 2 × MACs of ``architectures.network``. Training = 3× the forward (forward, input and weight
gradients; LoRA skips the frozen weights' gradients: 2×; full checkpointing adds a forward).
Diffusion inference per image = steps × (2 with classifier-free guidance) denoiser passes + the VAE
decoder + the text encoders once (2 × parameters × tokens). The fractions of peak are in
``data/efficiency.toml`` (conv nets: ``perf/data/efficiency.toml [cnn]``), each with its source.
Memory-bound time: every layer output (feature map) is touched ``accesses`` times by norms, activations
and residual adds (``data/efficiency.toml [conv]`` / ``[diffusion]``), at the stream bandwidth;
power-limited cards run their compute term at a sustained share of the boost clock
(``[sustained_clock]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpuwise.catalog import GPU, ModelArch, get_gpu
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
    "attention_slowdown_flops",
    "compute_dtype",
    "described",
    "forward_flops",
    "fraction",
    "host_s_per_image",
    "inference_flops_per_image",
    "memory_bytes_per_image",
    "steps",
    "sustained_clock",
    "training_flops",
    "vision_assumptions",
]


Kind = Literal["training", "inference"]


@dataclass(frozen=True)
class Fraction:
    """A share of the dense peak (0-1) a vision workload's kernels reach, and the sources it rests on."""

    value: float
    reason: str


def _table() -> dict[str, dict[str, Any]]:
    return load_data("efficiency.toml")


def sustained_clock(gpu: GPU) -> float:
    """Share (0-1) of the datasheet compute a power-limited card sustains (1.0 where none is published)."""
    return float(_table()["sustained_clock"].get(gpu.id, 1.0))


def _fused(w: Workload) -> bool:
    """Engines that fold norms and activations into the convolutions (no separate memory-bound passes).
    8-bit inference counts as one: eager PyTorch has no int8/fp8 convolutions on GPU, TensorRT does."""
    engine = (w.framework or "").lower() in _table()["conv"]["fused_frameworks"]
    return engine or w.precision in ("int8", "fp8")


def _feature_map_elements(w: Workload, arch: VisionArch) -> float:
    """Elements of every layer output of one forward of one sample (diffusion: one denoiser pass)."""
    height, width = image_dims(w)
    return sum(layer.output for layer in network(arch, height, width).layers)


def memory_bytes_per_image(w: Workload, arch: VisionArch, kind: Kind, element_bytes: float) -> float:
    """Bytes the memory-bound norms/activations/adds move for one image (diffusion inference: the whole
    sampling loop and the VAE decoder), at ``element_bytes`` per activation element."""
    if kind == "inference" and _fused(w):
        return 0.0
    table = _table()["diffusion" if arch.is_diffusion else "conv"]
    accesses = float(table.get(f"{kind}_accesses", table["inference_accesses"]))
    elements = _feature_map_elements(w, arch)
    pipe = arch.pipeline
    if kind == "inference" and pipe is not None:
        height, width = image_dims(w)
        vae = sum(layer.output for layer in vae_network(arch, height, width).layers)
        elements = steps(w, arch) * (2 if pipe.cfg else 1) * elements + vae
    total = elements * accesses * element_bytes
    if _nchw_penalised(w, arch, kind):  # the tutorial's 1.22x is end to end: the norms' passes slow too
        total *= _table()["conv"]["channels_last_speedup"]
    return total


def _nchw_penalised(w: Workload, arch: VisionArch, kind: Kind) -> bool:
    """16-bit conv-net training in NCHW (cuDNN transposes around its NHWC tensor-core kernels)."""
    sixteen_bit = w.precision not in ("fp32",)
    return not arch.is_diffusion and kind == "training" and sixteen_bit and not w.channels_last


def attention_slowdown_flops(w: Workload, arch: VisionArch, gpu: GPU) -> float:
    """FLOPs to add to one image's sampling loop so its attention runs at this GPU generation's attention
    rate relative to the A100 the diffusion fraction was measured on (perf efficiency.toml
    [attention.generation]: Volta/Turing have no FlashAttention-2, about half the Ampere rate)."""
    pipe = arch.pipeline
    if pipe is None or _fused(w):
        return 0.0
    height, width = image_dims(w)
    attention = sum(layer.macs for layer in network(arch, height, width).layers if layer.kind == "attention")
    reference = eff.attention_efficiency(_reference_gpu(), "inference")
    ratio = reference / eff.attention_efficiency(gpu, "inference")
    return steps(w, arch) * (2 if pipe.cfg else 1) * 2.0 * attention * (ratio - 1.0)


def _reference_gpu() -> GPU:
    """The GPU the diffusion fraction was measured on (diffusers' SDXL tutorial run: an A100 80GB)."""
    return get_gpu("a100-80gb-sxm")


def host_s_per_image(w: Workload, arch: VisionArch, op_s: float) -> float:
    """Eager host time of one image's diffusion sampling loop (layer units × ops per unit × ``op_s`` per
    step); 0 for conv nets (large batches keep the GPU ahead) and for compiled/fused engines."""
    pipe = arch.pipeline
    if pipe is None or _fused(w) or w.torch_compile:
        return 0.0
    height, width = image_dims(w)
    layers = len(network(arch, height, width).layers)
    per_step = layers * float(_table()["diffusion"]["host_ops_per_layer"]) * op_s
    return steps(w, arch) * per_step / max(w.batch_size, 1)


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


def fraction(w: Workload, arch: VisionArch, kind: Kind, gpu: GPU | None = None) -> Fraction:
    """Share of the peak this workload's tensor-core work reaches (× the GPU's sustained clock), and why."""
    share = _fraction(w, arch, kind)
    if gpu is not None and w.precision == "fp32" and not gpu.tf32_tflops:  # CUDA cores, no tensor cores
        simt = eff.fp32_matmul_fraction(gpu)
        share = Fraction(simt, f"fp32 on the CUDA cores (no TF32): {simt:.0%} of the fp32 peak (SGEMM rate)")
    clock = sustained_clock(gpu) if gpu is not None else 1.0
    if clock == 1.0:
        return share
    why = f"{share.reason}; {gpu.id if gpu else ''} sustains {clock:.0%} of its boost clock (power limit)"
    return Fraction(share.value * clock, why)


def _fraction(w: Workload, arch: VisionArch, kind: Kind) -> Fraction:
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
    fused = kind == "inference" and _fused(w)
    value = eff.cnn_fraction("inference" if fused else "training")
    where = ", fused engine)" if fused else ") + BatchNorm/ReLU passes at the memory bandwidth"
    why = [
        f"conv net {kind}: convolutions at {value:.0%} of the tensor-core peak (efficiency.toml [cnn]{where}"
    ]
    if _nchw_penalised(w, arch, kind):
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
        _fraction(w, arch, "inference").reason,
    ]
    pipe = arch.pipeline
    if pipe is not None:
        passes = "2 passes (classifier-free guidance)" if pipe.cfg else "1 pass (guidance-distilled)"
        lines.append(
            f"{steps(w, arch)} denoising steps × {passes} + the VAE decoder + the text encoders: "
            f"{inference_flops_per_image(w, arch) / 1e12:,.1f} TFLOPs per image"
        )
    return lines
