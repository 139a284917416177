#!/usr/bin/env python
"""gpuwise.vision against published figures: parameters and MACs, measured memory, measured speed.

Usage: python benchmarks/vision_checks.py

Three tables, each row with its source; the last line is one JSON object with the errors. Rows marked
"calibration" are the figures an efficiency constant was derived from (their error is ~0 by
construction); the others are independent checks. The traced-simulator cross-check of activations
runs in tests/vision/test_vision_simulated.py (it needs torch).
"""

from __future__ import annotations

import json

from gpuwise.memory import estimate_memory
from gpuwise.perf import predict
from gpuwise.units import GiB
from gpuwise.vision.architectures import network, vision_arch
from gpuwise.workload import workload_from_mapping

# id: (parameters, GMACs at the native size or None, source)
ARCHITECTURES = {
    "resnet-50": (25_557_032, 4.09, "torchvision model card"),
    "resnet-101": (44_549_160, 7.80, "torchvision model card"),
    "efficientnet-b0": (5_288_548, 0.39, "torchvision model card"),
    "efficientnet-b7": (66_347_960, 37.75, "torchvision model card"),
    "convnext-t": (28_589_128, 4.46, "torchvision model card"),
    "convnext-b": (88_591_464, 15.36, "torchvision model card"),
    "vit-b-16": (86_567_656, 17.56, "torchvision model card"),
    "vit-h-14": (632_045_800, 167.29, "torchvision model card"),
    "clip-vit-l-14": (303_966_208, None, "openai/CLIP ViT-L/14 visual"),
    "dit-xl-2": (675_000_000, 118.6, "Peebles & Xie 2023 Table 4"),
    "sd-1.5": (859_520_964, None, "diffusers UNet2DConditionModel (SD 1.5 config)"),
    "sdxl": (2_567_463_684, None, "diffusers UNet2DConditionModel (SDXL base config)"),
    "flux-1-dev": (11_900_000_000, None, "Black Forest Labs: 12 B"),
}

DIFFUSION_FAST = (
    "huggingface/diffusion-fast, A100-80GB, SDXL 1024², batch 1, 30 steps (collated_results_sdxl.csv)"
)
# (workload, measured peak GiB, measured seconds per image, calibration?)
SDXL_RUNS = [
    ({"precision": "fp32", "attention": "eager"}, 16.827, 7.362, False),
    ({"precision": "bf16", "attention": "eager"}, 8.961, 4.626, False),
    ({"precision": "bf16", "attention": "sdpa"}, 8.958, 3.315, True),
    ({"precision": "bf16", "attention": "sdpa", "channels_last": True}, 8.817, 2.538, True),
]


def pct(predicted: float, measured: float) -> float:
    return 100.0 * (predicted / measured - 1.0)


def main() -> None:
    errors: dict[str, float] = {}
    print("Parameters and MACs per image (native size)")
    print(
        f"{'model':16s} {'params':>15s} {'published':>15s} {'err %':>7s} {'GMACs':>9s} {'published':>9s}"
        "  source"
    )
    for model_id, (params, gmacs, source) in ARCHITECTURES.items():
        arch = vision_arch(model_id)
        assert arch is not None
        net = network(arch, arch.image_size, arch.image_size)
        shown = f"{gmacs:9.2f}" if gmacs else f"{'—':>9s}"
        print(
            f"{model_id:16s} {net.params:15,d} {params:15,d} {pct(net.params, params):+7.2f} "
            f"{net.macs / 1e9:9.2f} {shown}  {source}"
        )
        errors[f"params {model_id}"] = round(pct(net.params, params), 3)
    print()
    print(f"SDXL inference: {DIFFUSION_FAST}")
    print(f"{'run':38s} {'GiB':>7s} {'meas.':>7s} {'err %':>7s} {'s/img':>7s} {'meas.':>7s} {'err %':>7s}")
    for changes, gib, seconds, calibration in SDXL_RUNS:
        w = workload_from_mapping(
            {
                "model": "sdxl",
                "task": "cv-inference",
                "gpu": "a100-80gb-sxm",
                "denoising_steps": 30,
                **changes,
            }
        )
        mem, perf = estimate_memory(w).peak_allocated_bytes / GiB, predict(w).step_time_s
        label = f"{changes['precision']} {changes['attention']}" + (
            " channels_last" if len(changes) > 2 else ""
        )
        label += " (calibration)" if calibration else ""
        print(
            f"{label:38s} {mem:7.2f} {gib:7.2f} {pct(mem, gib):+7.1f} {perf:7.2f} {seconds:7.2f} "
            f"{pct(perf, seconds):+7.1f}"
        )
        errors[f"memory sdxl {label}"] = round(pct(mem, gib), 1)
        if not calibration:
            errors[f"time sdxl {label}"] = round(pct(perf, seconds), 1)
    print()
    print("MLPerf Inference (benchmarks/data/measured_throughput.csv rows, TensorRT)")
    mlperf = [
        ("thr-MLI-15 SDXL 8×L40S fp8, 20 steps (calibration)", {"model": "sdxl", "gpu": "l40s", "num_gpus": 8,
         "precision": "fp8", "denoising_steps": 20, "batch_size": 8, "framework": "tensorrt"}, 5.02),
        ("thr-MLI-13 ResNet-50 L4 int8", {"model": "resnet-50", "gpu": "l4", "precision": "int8",
         "batch_size": 64, "framework": "tensorrt"}, 12881.7),
    ]  # fmt: skip
    for label, values, measured in mlperf:
        p = predict(workload_from_mapping({"task": "cv-inference", **values}))
        print(f"{label:40s} predicted {p.samples_per_s:10.2f} images/s, measured {measured:10.2f} "
              f"({pct(p.samples_per_s, measured):+.1f} %)")  # fmt: skip
        errors[label] = round(pct(p.samples_per_s, measured), 1)
    print()
    _generation_checks(errors)
    print(json.dumps(errors))


def _generation_checks(errors: dict[str, float]) -> None:
    """Speed across GPU generations: ratios and seconds published runs show."""
    print("Across GPUs (per-row errors for DeepLearningExamples/diffusers rows: "
          "validate_throughput.py --data benchmarks/data/vision_reference.csv)")  # fmt: skip
    rn50 = {"model": "resnet-50", "task": "cv-train", "num_gpus": 8, "precision": "amp-fp16",
            "batch_size": 256, "channels_last": True}  # fmt: skip
    h100 = predict(workload_from_mapping({**rn50, "gpu": "h100-sxm"})).samples_per_s
    a100 = predict(workload_from_mapping({**rn50, "gpu": "a100-80gb-sxm"})).samples_per_s
    measured = 14.4 / 7.8
    label = "ResNet-50 training H100/A100 (MLPerf Training v3.0 ratio)"
    err = pct(h100 / a100, measured)
    print(
        f"{label:58s} predicted {h100 / a100:6.2f}x, measured {measured:6.2f}x ({err:+.1f} %)"
        "  Dell 16xH100 7.8 min vs 16xA100 14.4 min (silvertonconsulting.com, MLPerf Training v3.0)"
    )
    errors[label] = round(pct(h100 / a100, measured), 1)
    sd = {"model": "sd-1.5", "task": "cv-inference", "precision": "fp16", "batch_size": 1,
          "denoising_steps": 50, "image_size": 512}  # fmt: skip
    for gpu, seconds in (
        ("t4", 7.83),
        ("v100-sxm2-16gb", 2.96),
        ("a100-40gb-sxm", 1.96),
        ("h100-pcie", 1.44),
    ):
        predicted = predict(workload_from_mapping({**sd, "gpu": gpu})).step_time_s
        label = f"SD 1.5 512² 50 steps on {gpu} (s/image)"
        err = pct(predicted, seconds)
        print(f"{label:58s} predicted {predicted:6.2f} s,  measured {seconds:6.2f} s ({err:+.1f} %)"
              "  alexeigor/sd-benchmarks README@021a7dbb")  # fmt: skip
        errors[label] = round(pct(predicted, seconds), 1)


if __name__ == "__main__":
    main()
