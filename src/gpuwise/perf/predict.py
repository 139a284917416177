"""``predict``: one workload on one GPU type -> a PerfPrediction."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from gpuwise.catalog import GPU, ModelArch, get_gpu, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.memory import MemoryEstimate, estimate_memory
from gpuwise.perf import efficiency as eff
from gpuwise.perf.flops import attention_flops_per_token, matmul_params
from gpuwise.perf.inference import conv_forward, encoder_forward, predict_inference
from gpuwise.perf.numerics import Numerics, resolve
from gpuwise.perf.prediction import PerfPrediction
from gpuwise.perf.roofline import mfu_reference, peak_flops
from gpuwise.perf.training import predict_training, training_bound
from gpuwise.perf.vision import compute_dtype as vision_compute_dtype
from gpuwise.perf.vision import vision_assumptions
from gpuwise.workload import Workload
from gpuwise.workload.ml_framework import TPU_MODELLED

__all__ = ["predict", "training_fits"]


def predict(
    workload: Workload,
    gpu: GPU | None = None,
    *,
    compute_dtype: str | None = None,
    memory: MemoryEstimate | None = None,
) -> PerfPrediction:
    """Predict step time, throughput, MFU and the bounding resource of ``workload``.

    ``gpu`` defaults to the workload's GPU (use it to ask "what if on another GPU" without
    rebuilding the workload). ``compute_dtype`` forces the matmul dtype, e.g. 'fp4' for an
    NVFP4 (W4A4) engine, which the workload's weight-only 'int4' precision does not express.
    ``memory`` is this workload's estimate on this GPU when the caller already has it (the
    planner does): training predictions then do not run the memory model a second time.
    """
    gpu = gpu or get_gpu(workload.gpu)
    arch = get_model(workload.model)
    if not arch.is_transformer and workload.is_inference and workload.precision in {"int8", "fp8"}:
        compute_dtype = compute_dtype or workload.precision  # TensorRT runs int8/fp8 convolutions natively
    if not arch.is_transformer:
        compute_dtype = compute_dtype or vision_compute_dtype(workload, gpu)  # fp32 convs run in TF32
    num = resolve(workload, gpu, compute_dtype)
    m = eff.mamf(gpu)
    efficiency = {
        "mamf_bf16": m.bf16,
        "mamf_fp8": m.fp8,
        "mamf_source": m.source,
        "mamf_measured": m.measured,
        "stack_training": eff.stack("training"),
        "stack_inference": eff.stack("inference"),
        "attention_ratio": eff.attention_ratio(workload.attention),
        "attention_training": eff.attention_efficiency(gpu, "training", workload.attention),
        "attention_inference": eff.attention_efficiency(gpu, "inference", workload.attention),
        "decode_bandwidth_fraction": eff.bandwidth_fraction("decode"),
        "stream_bandwidth_fraction": eff.bandwidth_fraction("stream"),
        "fp32_matmul_fraction": eff.fp32_matmul_fraction(gpu),
    }
    assumptions = [] if m.measured else [f"no published MAMF for {gpu.id}: {m.source}"]
    if arch.origin == "size":  # '-m 13b': say which generic shape was assumed (catalog/model_size.py)
        assumptions.append(arch.notes)
    if gpu.is_tpu:  # bf16 peak x the stated efficiency; what a TPU estimate leaves out
        assumptions.append(TPU_MODELLED)
    if workload.is_training:
        prediction = _training(workload, gpu, arch, num, efficiency, assumptions, memory)
    else:
        prediction = _inference(workload, gpu, arch, num, efficiency, assumptions)
    return _with_compute_dtype_mfu(prediction, gpu, num.compute_dtype)


def _with_compute_dtype_mfu(prediction: PerfPrediction, gpu: GPU, compute_dtype: str) -> PerfPrediction:
    """Add the MFU against the compute dtype's own peak when it is not the BF16 reference (FP8, FP4, ...).

    ``mfu_pct`` always uses the dense BF16 peak (:func:`gpuwise.perf.roofline.mfu_reference`), so an
    FP8 run's 39 % is comparable with a BF16 run's; the FP8-peak figure (about half of it) is kept
    beside it, labelled, because FP8 papers quote that one.
    """
    reference_flops, reference_dtype = mfu_reference(gpu)
    own_peak = gpu.peak_tflops(compute_dtype) if compute_dtype in _OWN_PEAK_DTYPES else None
    own_pct = None
    if own_peak and compute_dtype != reference_dtype:
        own_pct = prediction.mfu_pct * reference_flops / (own_peak * 1e12)
    return dataclasses.replace(prediction, mfu_reference_dtype=reference_dtype, mfu_compute_dtype_pct=own_pct)


# dtypes whose own peak is quoted beside the BF16 MFU (an fp32 run at 80 % of the fp32 peak is 5 % MFU)
_OWN_PEAK_DTYPES = frozenset({"fp8", "fp4", "int8", "fp32", "tf32"})


def _training(
    workload: Workload,
    gpu: GPU,
    arch: ModelArch,
    num: Numerics,
    efficiency: dict[str, Any],
    assumptions: list[str],
    memory: MemoryEstimate | None = None,
) -> PerfPrediction:
    perf, more = predict_training(workload, gpu, arch, num)
    fits, fit_note = training_fits(workload, gpu, memory)
    notes = list(num.notes) + ([fit_note] if fit_note else [])
    n = workload.num_gpus
    tokens_s = perf.global_tokens_per_step / perf.step_time_s
    model_flops_s = perf.model_flops_per_token * tokens_s
    peak, _ = mfu_reference(gpu)
    seq = max(perf.micro_batch_tokens // max(workload.batch_size, 1), 1)
    samples_s = tokens_s / seq if arch.is_transformer else tokens_s
    rate, unit = (samples_s, "images/s") if workload.is_cv else (tokens_s, "tokens/s")
    return PerfPrediction(
        workload=workload.to_dict(),
        gpu=gpu.id,
        gpu_name=gpu.name,
        num_gpus=n,
        mode="training",
        precision=workload.precision,
        compute_dtype=num.compute_dtype,
        bound=training_bound(perf),
        step_time_s=perf.step_time_s,
        tokens_per_s=rate,
        tokens_per_s_per_gpu=rate / n,
        throughput_unit=unit,
        samples_per_s=samples_s,
        mfu_pct=100.0 * model_flops_s / (n * peak),
        model_tflops_per_gpu=model_flops_s / n / 1e12,
        fits=fits,
        training=perf,
        efficiency=efficiency,
        assumptions=assumptions + more,
        notes=notes,
    )


def training_fits(workload: Workload, gpu: GPU, est: MemoryEstimate | None = None) -> tuple[bool, str]:
    """Whether the training step fits in memory, per gpuwise.memory (the one memory model)."""
    if est is None:
        try:
            est = estimate_memory(workload, gpu)
        except GpuwiseError:
            return True, ""
    if est.fits:
        return True, ""
    return False, (
        f"does not fit: gpuwise.memory estimates {est.device_total_bytes / 2**30:,.1f} GiB per GPU "
        f"on {est.gpu_memory_bytes / 2**30:,.1f} GiB; see `gpuwise memory` for what would make it fit"
    )


def _inference(
    workload: Workload,
    gpu: GPU,
    arch: ModelArch,
    num: Numerics,
    efficiency: dict[str, Any],
    assumptions: list[str],
) -> PerfPrediction:
    """An inference prediction: the fields every kind shares, then the kind's own speed model."""
    peak_flops(gpu, num.compute_dtype)  # raises when the GPU has no peak for the compute dtype
    peak, _ = mfu_reference(gpu)
    base = functools.partial(
        PerfPrediction,
        workload=workload.to_dict(),
        gpu=gpu.id,
        gpu_name=gpu.name,
        num_gpus=workload.num_gpus,
        mode="inference",
        precision=workload.precision,
        compute_dtype=num.compute_dtype,
        efficiency=efficiency,
        notes=list(num.notes),
    )
    if not arch.is_transformer:
        return _conv_inference(base, workload, gpu, arch, num, peak, assumptions)
    if not arch.is_decoder:
        return _encoder_inference(base, workload, gpu, arch, num, peak, assumptions)
    return _decoder_inference(base, workload, gpu, arch, num, peak, assumptions)


_Base = Callable[..., PerfPrediction]


def _conv_inference(
    base: _Base,
    workload: Workload,
    gpu: GPU,
    arch: ModelArch,
    num: Numerics,
    peak: float,
    assumptions: list[str],
) -> PerfPrediction:
    """A conv net or diffusion model: images/s from the layer list's FLOPs at the sourced efficiency."""
    n, replicas = workload.num_gpus, workload.data_parallel
    seconds, flops = conv_forward(workload, gpu, arch, num)
    images_s = workload.batch_size / seconds * replicas
    return base(
        bound="compute",
        step_time_s=seconds,
        tokens_per_s=images_s,
        tokens_per_s_per_gpu=images_s / n,
        throughput_unit="images/s",
        samples_per_s=images_s,
        mfu_pct=100.0 * flops * replicas / seconds / (n * peak),
        model_tflops_per_gpu=flops * replicas / seconds / n / 1e12,
        fits=True,
        assumptions=[*assumptions, *vision_assumptions(workload, arch)],
    )


def _encoder_inference(
    base: _Base,
    workload: Workload,
    gpu: GPU,
    arch: ModelArch,
    num: Numerics,
    peak: float,
    assumptions: list[str],
) -> PerfPrediction:
    """An encoder (BERT, ViT): one forward pass per batch; samples/s (images/s for vision tasks)."""
    n, replicas = workload.num_gpus, workload.data_parallel
    seconds, tokens, bound = encoder_forward(workload, gpu, arch, num)
    seq = tokens / workload.batch_size
    flops = tokens * (2 * matmul_params(arch) + attention_flops_per_token(arch, seq, causal=False))
    samples_s = workload.batch_size / seconds * replicas
    rate, unit = (samples_s, "images/s") if workload.is_cv else (tokens / seconds * replicas, "tokens/s")
    return base(
        bound=bound,
        step_time_s=seconds,
        tokens_per_s=rate,
        tokens_per_s_per_gpu=rate / n,
        throughput_unit=unit,
        samples_per_s=samples_s,
        mfu_pct=100.0 * flops / seconds / (workload.tp * workload.pp * peak),
        model_tflops_per_gpu=flops / seconds / (workload.tp * workload.pp) / 1e12,
        fits=True,
        assumptions=[*assumptions, "encoder model: one forward pass per batch (no generation)"],
    )


def _decoder_inference(
    base: _Base,
    workload: Workload,
    gpu: GPU,
    arch: ModelArch,
    num: Numerics,
    peak: float,
    assumptions: list[str],
) -> PerfPrediction:
    """A decoder: generation speed (TTFT, time per output token, output tokens/s) and whether it fits."""
    n = workload.num_gpus
    perf, more, fits = predict_inference(workload, gpu, arch, num)
    per_request = (
        2 * matmul_params(arch) * (perf.prompt_tokens + perf.output_tokens)
        + perf.prompt_tokens * attention_flops_per_token(arch, perf.prompt_tokens, causal=True)
        + perf.output_tokens
        * attention_flops_per_token(arch, perf.prompt_tokens + perf.output_tokens / 2, causal=False)
    )
    model_flops_s = per_request * perf.requests_per_s
    bound = perf.throughput_bound
    notes = list(num.notes)
    if not fits:
        notes.append(
            f"does not fit: {perf.weights_bytes_per_gpu / 1e9:,.1f} GB of weights per GPU leave no room "
            f"for one {perf.prompt_tokens + perf.output_tokens}-token KV cache on {gpu.memory_gb:g} GB; "
            "quantize the weights (int8/int4), shard with tp, or use a larger GPU"
        )
    return base(
        notes=notes,
        bound=bound,
        step_time_s=perf.tpot_s,
        tokens_per_s=perf.output_tokens_per_s,
        tokens_per_s_per_gpu=perf.output_tokens_per_s_per_gpu,
        samples_per_s=perf.requests_per_s,
        throughput_unit="output tokens/s",
        mfu_pct=100.0 * model_flops_s / (n * peak),
        model_tflops_per_gpu=model_flops_s / n / 1e12,
        fits=fits,
        inference=perf,
        assumptions=assumptions + more,
    )
