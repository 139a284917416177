"""The planner on vision and diffusion workloads: techniques that fit the architecture, none that do not."""

from pathlib import Path

import pytest

from gpuwise.errors import GpuwiseError
from gpuwise.plan import make_plan
from gpuwise.workload import load_workload, workload_from_mapping

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LLM_ONLY = {
    "lora",
    "qlora",
    "flash_attention",
    "weight_int4",
    "weight_fp8",
    "weight_int8",
    "kv_fp8",
    "more_concurrency",
}


@pytest.fixture(scope="module")
def resnet_plan():
    return make_plan(load_workload(EXAMPLES / "resnet50-40pct.yaml"))


def ids(plan):
    return {t.id for t in plan.techniques}


def test_resnet50_at_40pct_gets_vision_techniques_and_no_llm_ones(resnet_plan):
    p = resnet_plan
    assert not ids(p) & LLM_ONLY  # no LoRA on a ResNet, no FlashAttention without attention
    recommended = [t.id for t in p.recommended]
    # the stated 40 % utilization puts "fix the pipeline" first (issue 13 item 2), then the GPU-side edits
    assert recommended[0] == "fix_pipeline" and recommended[1:3] == ["mixed_precision", "channels_last"]
    config = p.config.workload
    assert config.precision == "amp-bf16" and config.channels_last
    assert p.config.outcome.throughput / p.current.throughput > 1.8  # AMP 1.63× then NHWC 1.22×
    tools = {t.id: t.why for t in p.tools}
    assert "dali" in tools and "images/s" in tools["dali"]  # input pipeline sized to the predicted rate
    assert "torch.compile" in tools
    loop = p.config.snippets["PyTorch loop"]
    assert "channels_last" in loop and "criterion(model(images" in loop
    assert p.memory.method == "analytic"
    assert any("ResNet bottleneck stages" in a for a in p.memory.current["assumptions"])


def test_sdxl_inference_plan_speaks_images_and_keeps_llm_edits_out():
    p = make_plan(load_workload(EXAMPLES / "sdxl-inference-1024.yaml"))
    assert p.current.throughput_unit == "images/s" and p.current.fits
    assert not ids(p) & LLM_ONLY
    assert "channels_last" in ids(p)  # channels_last + torch.compile: diffusers' 3.31 s → 2.54 s
    assert p.memory.current["peak_phase"] == "vae_decode"


def test_sdxl_full_fine_tune_on_24gb_moves_to_lora_not_qlora():
    p = make_plan(load_workload(EXAMPLES / "sdxl-lora-24gb.yaml"))
    assert not p.current.fits
    assert "lora" in ids(p) and "qlora" not in ids(p)
    assert p.config.workload.task == "lora" and p.config.workload.gpu == "rtx-4090"
    assert p.config.outcome.fits


def test_a_model_without_a_layer_list_names_the_simulator(tmp_path, monkeypatch):
    from gpuwise.catalog import models as models_module

    models = tmp_path / "models.yaml"
    models.write_text("- id: my-detector\n  mlp_type: conv\n  params_b: 0.04\n")
    monkeypatch.setenv("GPUWISE_MODELS", str(models))
    models_module.clear_cache()
    try:
        with pytest.raises(GpuwiseError, match=r"cannot plan my-detector.*--traced --model-factory"):
            make_plan(workload_from_mapping({"model": "my-detector", "task": "cv-train"}))
    finally:
        monkeypatch.delenv("GPUWISE_MODELS")
        models_module.clear_cache()


def test_lora_on_a_cnn_is_refused_in_one_line():
    with pytest.raises(GpuwiseError, match="no attention projections"):
        workload_from_mapping({"model": "resnet-50", "task": "lora"})
