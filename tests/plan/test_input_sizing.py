"""Input-pipeline sizing of vision training plans: cores and storage reads per GPU from sourced per-core
rates (perf/data/input_pipeline.toml), DALI ranked first only when the node's cores are short."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.plan import make_plan
from gpuwise.plan.input_sizing import size_input_pipeline
from gpuwise.plan.types import Outcome
from gpuwise.workload import load_workload, workload_from_mapping

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def _outcome(gpu: str, n: int, images_per_s: float) -> Outcome:
    return Outcome(gpu, n, True, 10 * GIB, 80 * GIB, 80.0, images_per_s, "images/s")


def _cv(**kw):
    base = {"model": "resnet-50", "task": "cv-train", "image_size": 224, "precision": "amp-bf16"}
    return workload_from_mapping({**base, **kw})


def test_resnet50_on_a_dga100_needs_ten_pil_cores_per_gpu_and_fits_the_node():
    """2,500 img/s per GPU x (2.229 ms PIL decode of a 480p JPEG + 1.949 ms of v1 transforms) = 10.4 cores;
    x (1.576 + 1.155) ms with decode_jpeg + v2 = 6.8; a DGX A100 has 16 cores per GPU, 12 usable."""
    sizing = size_input_pipeline(_cv(gpu="a100-80gb-sxm", num_gpus=8), _outcome("a100-80gb-sxm", 8, 20_000))
    assert sizing is not None and sizing.images_per_s_per_gpu == 2_500
    pil, fast, dali = sizing.options
    assert pil.cores_per_gpu == pytest.approx(2_500 * (2.229 + 1.949) / 1000)
    assert fast.cores_per_gpu == pytest.approx(2_500 * (1.576 + 1.155) / 1000)
    assert "DALI" in dali.name and dali.gpu_ms_per_s == pytest.approx(2_500 * 0.128)
    assert sizing.node_cores_per_gpu == 16 and sizing.verdict == "enough" and pil.fits
    assert sizing.read_mb_per_s_per_gpu == pytest.approx(2_500 * 0.108)  # 108 KB per ImageNet JPEG
    assert sizing.read_mb_per_s_total == pytest.approx(8 * 2_500 * 0.108)


def test_when_the_nodes_cores_are_short_dali_is_ranked_first():
    """4,500 img/s per H100 needs 18.8 PIL cores and 12.3 fast-path cores; a DGX H100 gives 14, 10.5 of them
    usable for workers: short, so DALI leads; at 3,500 img/s only the fast path fits: tight."""
    short = size_input_pipeline(_cv(gpu="h100-sxm", num_gpus=8), _outcome("h100-sxm", 8, 8 * 4_500))
    assert short is not None and short.verdict == "short" and "DALI" in short.options[0].name
    tight = size_input_pipeline(_cv(gpu="h100-sxm", num_gpus=8), _outcome("h100-sxm", 8, 8 * 3_500))
    assert tight is not None and tight.verdict == "tight" and "decode_jpeg" in tight.options[0].name


def test_larger_crops_decode_larger_sources_and_resize_more_pixels():
    """At 512 px the 720p decode row (3.056 ms) and (512/224)^2 x the transforms apply."""
    sizing = size_input_pipeline(_cv(gpu="rtx-4090", image_size=512), _outcome("rtx-4090", 1, 100))
    assert sizing is not None and sizing.source_resolution.startswith("720p")
    fast = next(o for o in sizing.options if "decode_jpeg" in o.name)
    assert fast.cores_per_gpu == pytest.approx(100 * (3.056 + 1.155 * (512 / 224) ** 2) / 1000)
    assert sizing.node is None and sizing.verdict == "unknown" and fast.fits is None


def test_only_vision_training_with_a_speed_is_sized():
    llm = workload_from_mapping({"model": "llama-3-8b", "task": "lora", "gpu": "a100-80gb-sxm"})
    assert size_input_pipeline(llm, _outcome("a100-80gb-sxm", 1, 3_000)) is None
    assert size_input_pipeline(_cv(gpu="t4"), Outcome("t4", 1, False, 0, 16 * GIB, 0.0)) is None


def test_the_plan_of_resnet50_on_8_a100_states_the_sizing_in_text_and_json():
    plan = make_plan(load_workload(ROOT / "examples" / "resnet50-8xa100-40pct.yaml"))
    sizing = plan.input_pipeline
    assert sizing is not None
    per_gpu = plan.config.outcome.throughput / plan.config.outcome.num_gpus
    assert sizing.images_per_s_per_gpu == pytest.approx(per_gpu)
    data = plan.to_dict()["input_pipeline"]
    assert data["verdict"] == "enough" and len(data["options"]) == 3 and "cores" in data["summary"]
    assert any("torchcodec" in s for s in data["sources"])
    dali = next(t for t in plan.tools if t.name == "NVIDIA DALI")
    assert "Not needed on DGX A100" in dali.why
