"""Memory, fit and cost of vision and diffusion workloads (analytic, gpuwise.vision), checked against
published measurements and against the properties every estimate must have."""

import json

import pytest

from gpuwise.memory import estimate_memory, fit_table, max_batch_that_fits
from gpuwise.perf import predict
from gpuwise.units import GiB
from gpuwise.workload import workload_from_mapping


def W(**values):
    return workload_from_mapping(values)


def resnet(**changes):
    base = dict(model="resnet-50", task="cv-train", batch_size=256, precision="amp-bf16", gpu="a100-80gb-sxm")
    return W(**{**base, **changes})


def test_resnet50_training_224_batch_256():
    amp, fp32 = estimate_memory(resnet()), estimate_memory(resnet(precision="fp32"))
    assert amp.peak_phase == fp32.peak_phase == "backward"
    acts = amp.breakdown["activations"]
    # bf16 activations are half of fp32 ones; ~40-45 MB per image under AMP (the traced simulation of
    # a torchvision-shaped ResNet-50 agrees within 10 %: tests/vision/test_vision_simulated.py)
    assert fp32.breakdown["activations"] / acts == pytest.approx(2.0, rel=0.02)
    assert 38e6 < acts / 256 < 48e6
    assert 10 * GiB < amp.device_total_bytes < 13 * GiB
    # weights, gradients and AdamW state are small: 25.6 M parameters × (4 + 4 + 8) bytes
    assert amp.breakdown["optimizer_states"] == pytest.approx(25_557_032 * 8)
    assert any("ResNet bottleneck stages at 224×224" in a for a in amp.assumptions)
    # NVIDIA DeepLearningExamples trains ResNet-50 v1.5 with AMP at batch 256 on 16 GB V100s
    assert estimate_memory(resnet(gpu="v100-sxm2-16gb", precision="amp-fp16")).fits


def test_memory_grows_with_batch_and_pixels_and_checkpointing_cuts_it():
    small, big = estimate_memory(resnet(batch_size=64)), estimate_memory(resnet(batch_size=128))
    assert big.breakdown["activations"] == pytest.approx(2 * small.breakdown["activations"], rel=1e-6)
    at448 = estimate_memory(resnet(batch_size=64, image_size=448))
    assert at448.breakdown["activations"] / small.breakdown["activations"] == pytest.approx(4.0, rel=0.03)
    wide = estimate_memory(resnet(batch_size=64, image_size=224, image_width=448))
    assert wide.breakdown["activations"] / small.breakdown["activations"] == pytest.approx(2.0, rel=0.03)
    ckpt = estimate_memory(resnet(grad_checkpointing="full"))
    # keeps 16 block inputs and re-runs the largest unit (the 112² stem) — CNNs save less than transformers
    assert ckpt.breakdown["activations"] < 0.6 * estimate_memory(resnet()).breakdown["activations"]


def test_largest_batch_and_fit_table():
    best = max_batch_that_fits(resnet(gpu="a10"), headroom_pct=0)  # 24 GB
    assert 256 < best < 700
    assert estimate_memory(resnet(gpu="a10", batch_size=best)).fits
    assert not estimate_memory(resnet(gpu="a10", batch_size=best + 8)).fits
    table = fit_table(resnet(batch_size=1024))
    rows = {(r.gpu, r.num_gpus): r for r in table.rows}
    assert rows[("a100-80gb-sxm", 1)].headroom_pct > 0 and ("t4", 1) not in rows  # 16 GB: too small


def sdxl(**changes):
    return W(**{"model": "sdxl", "gpu": "a100-80gb-sxm", **changes})


@pytest.mark.parametrize(
    "precision, attention, measured_gib",
    # diffusion-fast (huggingface/diffusion-fast; results in the sayakpaul/sample-datasets dataset,
    # collated_results_sdxl.csv):
    # SDXL base, 1024², batch 1, 30 steps, 80 GB A100, torch.cuda.max_memory_allocated in GiB.
    [("fp32", "eager", 16.827), ("bf16", "eager", 8.961), ("bf16", "sdpa", 8.958)],
)
def test_sdxl_inference_1024_against_measured_peaks(precision, attention, measured_gib):
    est = estimate_memory(
        sdxl(task="cv-inference", precision=precision, attention=attention, denoising_steps=30)
    )
    assert est.workload.image_size == 1024  # the model's native size when the workload gives none
    assert est.peak_phase == "vae_decode"  # the decoder at full resolution, not the 128² latent UNet
    error = est.peak_allocated_bytes / GiB / measured_gib - 1
    assert -0.15 < error < 0.05, f"{error:+.1%}"


def test_sdxl_fp16_upcasts_the_vae_and_batches_scale():
    one = estimate_memory(sdxl(task="cv-inference", precision="fp16"))
    assert any("decodes in fp32" in a for a in one.assumptions)
    assert any("classifier-free guidance" in a for a in one.assumptions)
    four = estimate_memory(sdxl(task="cv-inference", precision="fp16", batch_size=4))
    weights = one.breakdown["weights"]
    assert four.breakdown["weights"] == weights
    assert four.peak_allocated_bytes - weights == pytest.approx(
        4 * (one.peak_allocated_bytes - weights), rel=0.01
    )


def test_sdxl_lora_and_full_fine_tune():
    lora = estimate_memory(sdxl(task="lora", precision="fp16", lora_rank=4, gpu="rtx-4090"))
    # rank 4 on to_q/to_k/to_v/to_out of SDXL's 70 transformer blocks: 5.8 M parameters (the published
    # SDXL LoRA files of diffusers' train_text_to_image_lora_sdxl at rank 4 are ~23 MB in fp32)
    assert lora.breakdown["lora_adapters"] == pytest.approx(5_806_080 * (4 + 4 + 8), rel=0.01)
    assert lora.fits and lora.breakdown["weights"] == pytest.approx(
        (2_567_463_684 + 817_720_320 + 83_653_863) * 2
    )
    ckpt = estimate_memory(
        sdxl(task="lora", precision="fp16", lora_rank=4, gpu="rtx-4090", grad_checkpointing="full")
    )
    assert ckpt.device_total_bytes < 0.7 * lora.device_total_bytes
    full = estimate_memory(sdxl(task="cv-train", precision="amp-bf16"))
    assert (
        full.peak_phase == "optimizer_step"
        and not estimate_memory(sdxl(task="cv-train", gpu="rtx-4090")).fits
    )
    # fp32 master + gradients + AdamW state of 2.57 B parameters alone are 41 GB
    assert full.device_total_bytes > 2_567_463_684 * 16


def test_flux_inference_holds_its_12b_transformer_and_t5():
    est = estimate_memory(W(model="flux-1-dev", task="cv-inference", precision="bf16", gpu="h100-sxm"))
    weights = est.breakdown["weights"]
    assert weights == pytest.approx((11_901_408_320 + 4_885_371_136 + 83_819_683) * 2, rel=1e-6)
    assert est.fits and not any("classifier-free" in a for a in est.assumptions)  # guidance-distilled


def test_throughput_is_flops_times_a_sourced_efficiency():
    p = predict(sdxl(task="cv-inference", precision="bf16", denoising_steps=30))
    # diffusers' A100 figure the efficiency comes from: 3.31 s per image (bf16 + SDPA, 30 steps)
    assert p.step_time_s == pytest.approx(3.31, rel=0.03)
    assert any("30 denoising steps × 2 passes" in a for a in p.assumptions)
    r50 = predict(resnet())
    assert r50.throughput_unit == "images/s" and 1500 < r50.samples_per_s < 3500
    nhwc = predict(resnet(channels_last=True))
    assert nhwc.samples_per_s / r50.samples_per_s == pytest.approx(1.22, rel=0.03)


def test_cli_memory_fit_cost_for_vision(cli):
    mem = cli("memory", "-m", "resnet-50", "-t", "cv-train", "-b", "256", "-p", "amp-bf16", "--json")
    assert mem.exit_code == 0, mem.stderr
    assert mem.json()["peak_phase"] == "backward"
    text = cli("memory", "-m", "sdxl", "-t", "cv-inference", "--image-size", "768", "--image-width", "1344")
    assert text.exit_code == 0 and "768×1344" in text.stdout
    fit = cli("fit", "-m", "sdxl", "-t", "lora", "-p", "fp16", "--json")
    assert fit.exit_code == 0 and any(r["headroom_pct"] > 10 for r in fit.json()["rows"])
    cost = cli(
        "cost",
        "-m",
        "sdxl",
        "-t",
        "cv-inference",
        "-p",
        "fp16",
        "-g",
        "l4",
        "--denoising-steps",
        "20",
        "--usd-per-hour",
        "0.80",
    )
    assert cost.exit_code == 0 and "$ per 1M images" in cost.stdout and "tokens" not in cost.stdout
    bad = cli("memory", "-m", "resnet-50", "-t", "lora")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1


def test_vision_json_round_trips():
    doc = json.loads(json.dumps(estimate_memory(sdxl(task="cv-inference")).to_dict()))
    assert doc["workload"]["image_width"] == 0 and doc["phases"][0]["name"] == "denoise"


def test_sdxl_at_any_size_scales_activations_and_work():
    at = {
        size: estimate_memory(sdxl(task="lora", precision="fp16", image_size=size)).breakdown["activations"]
        for size in (512, 1024)
    }
    # 4× the pixels: ~4× the activations (the 77-token text context is the same at both sizes)
    assert 3.8 <= at[1024] / at[512] < 5.0
    wide = predict(sdxl(task="cv-inference", precision="bf16", image_size=768, image_width=1344))
    square = predict(sdxl(task="cv-inference", precision="bf16", image_size=1024))
    assert wide.step_time_s == pytest.approx(square.step_time_s * 768 * 1344 / 1024**2, rel=0.15)


def test_non_square_vit_counts_its_patch_grid_in_memory_and_speed():
    square = W(model="vit-b-16", task="cv-train", batch_size=64, precision="amp-bf16", gpu="a100-80gb-sxm")
    wide = square.with_changes(image_width=448)
    assert predict(wide).training.micro_batch_tokens == 64 * (14 * 28 + 1)
    assert predict(square).training.micro_batch_tokens == 64 * 197
    assert (
        estimate_memory(wide).breakdown["activations"]
        > 1.9 * estimate_memory(square).breakdown["activations"]
    )
