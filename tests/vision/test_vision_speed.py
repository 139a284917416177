"""Conv-net and diffusion speed: tensor-core FLOPs + feature-map bytes at the bandwidth; eager host bound.

Hand arithmetic against the layer list and the package data; the published rows themselves are checked in
tests/perf/test_perf_validation.py (benchmarks/data/vision_reference.csv).
"""

from __future__ import annotations

import pytest

from gpuwise.catalog import get_gpu
from gpuwise.perf import predict
from gpuwise.perf import vision as vision_perf
from gpuwise.vision.architectures import network, vision_arch
from gpuwise.workload import workload_from_mapping

RN50 = {
    "model": "resnet-50",
    "task": "cv-train",
    "precision": "amp-fp16",
    "batch_size": 256,
    "channels_last": True,
}


def _images_s(gpu: str, **changes) -> float:
    return predict(workload_from_mapping({**RN50, "gpu": gpu, **changes})).samples_per_s


def test_resnet50_training_time_is_flops_plus_batchnorm_bytes():
    w = workload_from_mapping({**RN50, "gpu": "a100-80gb-sxm"})
    arch = vision_arch("resnet-50")
    assert arch is not None
    elements = sum(layer.output for layer in network(arch, 224, 224).layers)
    assert elements == pytest.approx(11.32e6, rel=0.01)  # every feature map of one 224² image
    # 15 accesses (BatchNorm + ReLU forward and backward) of a 2-byte element
    assert vision_perf.memory_bytes_per_image(w, arch, "training", 2.0) == pytest.approx(15 * 2 * elements)
    gpu = get_gpu("a100-80gb-sxm")
    compute_s = 3 * 2 * 4.089e9 / (312e12 * 0.36)
    memory_s = 15 * 2 * elements / (gpu.mem_bw_bytes_per_s * 0.9)
    # NVIDIA DeepLearningExamples: 2,470 img/s on one A100 80GB (the calibration row)
    assert _images_s("a100-80gb-sxm") == pytest.approx(1 / (compute_s + memory_s), rel=0.03)
    assert _images_s("a100-80gb-sxm") == pytest.approx(2470, rel=0.03)


def test_newer_gpus_gain_less_than_their_flops():
    h100, a100 = _images_s("h100-sxm"), _images_s("a100-80gb-sxm")
    flops_ratio = get_gpu("h100-sxm").bf16_tflops / get_gpu("a100-80gb-sxm").bf16_tflops
    # the BatchNorm/ReLU bytes scale with bandwidth (1.6x), the convolutions with FLOPs (3.2x)
    assert 1.6 < h100 / a100 < 2.4 < flops_ratio


def test_fused_engines_skip_the_memory_bound_passes():
    eager = workload_from_mapping(
        {"model": "resnet-50", "task": "cv-inference", "gpu": "l4", "batch_size": 64}
    )
    arch = vision_arch("resnet-50")
    assert arch is not None
    assert vision_perf.memory_bytes_per_image(eager, arch, "inference", 2.0) > 0
    fused = workload_from_mapping(
        {"model": "resnet-50", "task": "cv-inference", "gpu": "l4", "batch_size": 64, "framework": "tensorrt"}
    )
    assert vision_perf.memory_bytes_per_image(fused, arch, "inference", 2.0) == 0


def test_power_limited_t4_runs_its_compute_at_the_sustained_clock():
    w = workload_from_mapping({"model": "resnet-50", "task": "cv-inference", "gpu": "t4", "batch_size": 256})
    arch = vision_arch("resnet-50")
    assert arch is not None
    t4 = vision_perf.fraction(w, arch, "inference", get_gpu("t4"))
    assert t4.value == pytest.approx(0.36 * 0.675) and "sustains 68%" in t4.reason
    assert vision_perf.fraction(w, arch, "inference", get_gpu("a10")).value == pytest.approx(0.36)


def test_eager_sd15_is_host_bound_on_fast_gpus():
    sd = {
        "model": "sd-1.5",
        "task": "cv-inference",
        "precision": "fp16",
        "denoising_steps": 50,
        "image_size": 512,
    }
    a100 = predict(workload_from_mapping({**sd, "gpu": "a100-80gb-sxm"})).step_time_s
    h100 = predict(workload_from_mapping({**sd, "gpu": "h100-sxm"})).step_time_s
    t4 = predict(workload_from_mapping({**sd, "gpu": "t4"})).step_time_s
    # 389 layer units x 8 eager ops x 10 us x 50 steps + the engine step overhead
    host_s = 389 * 8 * 10e-6 * 50
    assert a100 == pytest.approx(host_s + 0.5e-3, rel=1e-6) and h100 == pytest.approx(a100)
    compiled = predict(workload_from_mapping({**sd, "gpu": "h100-sxm", "torch_compile": True})).step_time_s
    assert compiled < h100 / 2 and t4 > 3 * a100  # the T4 is GPU-bound


def test_diffusion_attention_runs_at_the_generations_attention_rate():
    sd = {
        "model": "sd-1.5",
        "task": "cv-inference",
        "precision": "fp16",
        "denoising_steps": 50,
        "image_size": 512,
    }
    arch = vision_arch("sd-1.5")
    assert arch is not None
    w = workload_from_mapping({**sd, "gpu": "v100-sxm2-16gb"})
    attention = sum(layer.macs for layer in network(arch, 512, 512).layers if layer.kind == "attention")
    # Volta 0.35 vs Ampere 0.70 (perf efficiency.toml [attention.generation]): attention costs twice the FLOPs
    expected = 50 * 2 * 2 * attention * (0.70 / 0.35 - 1)
    assert vision_perf.attention_slowdown_flops(w, arch, get_gpu("v100-sxm2-16gb")) == pytest.approx(expected)
    assert vision_perf.attention_slowdown_flops(w, arch, get_gpu("a100-40gb-sxm")) == 0
