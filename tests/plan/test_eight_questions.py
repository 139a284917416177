"""Issue 28's eight questions, each an example workload: the plan's recommendations pay for themselves
on its own numbers, and the parts fixed for them hold on look-alikes (other sizes, GPUs, counts)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from gpuwise.plan import make_plan
from gpuwise.workload import load_workload, workload_from_mapping

ROOT = Path(__file__).resolve().parents[2]
EIGHT = (
    "lora-70b-2xa100-oom",
    "serving-chat-50rps",
    "resnet50-8xa100-40pct",
    "startup-8xh100-buy-or-rent",
    "pretrain-70b-64xh100",
    "sdxl-t4",
    "serving-mixtral-8x7b",
    "qwen2.5-7b-fullft-8k-h100",
)
SERVING = {"serving-chat-50rps", "serving-mixtral-8x7b"}


@pytest.mark.parametrize("name", [n for n in EIGHT if n not in SERVING])
def test_every_recommended_edit_pays_for_itself(name):
    """Each recommended technique either is needed to fit or moves the goal by the planner's minimum; no
    recommended edit changes the global batch (a hyperparameter)."""
    from gpuwise.diagnose import thresholds as T

    plan = make_plan(load_workload(ROOT / "examples" / f"{name}.yaml"))
    for t in plan.recommended:
        assert t.quality_risk != "changes-training", t.id
        paid = t.needed_to_fit or t.id == "fix_pipeline"
        gain = t.impact.throughput_x
        assert paid or (gain is not None and (gain - 1) * 100 >= T.PLAN_MIN_GAIN_PCT), (t.id, gain)
    if plan.config.global_batch_before is not None:
        assert plan.config.global_batch_after == plan.config.global_batch_before


@pytest.mark.parametrize(
    ("gpu", "n", "batch"), [("a100-80gb-sxm", 8, 256), ("h100-sxm", 8, 256), ("a10", 1, 128)]
)
def test_a_bigger_batch_the_model_rules_out_is_not_offered_for_idle_time(gpu, n, batch):
    """A stated low utilization is no reason for a bigger batch when the model predicts no gain from one
    (small_batch ruled out): the 4x batch is 'not-recommended', never 'optional'."""
    w = workload_from_mapping(
        {
            "model": "resnet-50",
            "task": "cv-train",
            "precision": "amp-bf16",
            "optimizer": "sgd",
            "batch_size": batch,
            "gpu": gpu,
            "num_gpus": n,
            "utilization_pct": 40,
        }
    )
    plan = make_plan(w)
    ruled_out = "small_batch" not in {f.id for f in plan.diagnosis.findings}
    for t in (t for t in plan.techniques if t.id.startswith("bigger_batch")):
        assert t.verdict != "recommended"
        if ruled_out:
            assert t.verdict == "not-recommended", t.reason


@pytest.mark.parametrize(
    ("model", "n", "batch", "pp"),
    [("llama-3-70b", 64, 1, 8), ("llama-3-70b", 64, 2, 8), ("llama-3-70b", 64, 4, 8)],
)
def test_a_pipeline_parallel_pretraining_plan_gives_megatron_flags_not_an_fsdp_block(model, n, batch, pp):
    """TP x PP layouts (a Megatron user's own, kept by the plan) are not something FSDP2 or a plain loop
    can run: the snippet is Megatron-LM's pretrain_gpt.py with the plan's own TP, PP, micro- and global
    batch and the model's shape."""
    w = workload_from_mapping(
        {
            "model": model,
            "task": "pretrain",
            "precision": "amp-bf16",
            "batch_size": batch,
            "grad_accum": 16,
            "seq_len": 8192,
            "gpu": "h100-sxm",
            "num_gpus": n,
            "tp": 8,
            "pp": pp,
            "sharding": "none",
        }
    )
    plan = make_plan(w)
    final = plan.config.workload
    assert final.pp > 1, plan.scaling.strategy
    text = plan.config.snippets["Megatron-LM pretrain_gpt.py"]
    assert "PyTorch FSDP2" not in plan.config.snippets and "PyTorch loop" not in plan.config.snippets
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    flag = {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("--")}
    assert int(flag["--tensor-model-parallel-size"]) == final.tp
    assert int(flag["--pipeline-model-parallel-size"]) == final.pp
    assert int(flag["--micro-batch-size"]) == final.batch_size
    assert int(flag["--global-batch-size"]) == final.global_batch == w.global_batch
    assert int(flag["--seq-length"]) == 8192 and "pretrain_gpt.py" in words
    assert (final.precision == "fp8") == ("--fp8-format" in flag)


@pytest.mark.parametrize(
    ("model", "gpu", "steps", "repo"),
    [
        ("sdxl", "t4", 30, "stabilityai/stable-diffusion-xl-base-1.0"),
        ("sd-1.5", "l4", 0, "runwayml/stable-diffusion-v1-5"),
        ("sdxl", "a10g", 20, "stabilityai/stable-diffusion-xl-base-1.0"),
    ],
)
def test_a_diffusion_inference_plan_gives_a_diffusers_run_that_matches_it(model, gpu, steps, repo):
    """The configuration part of an image-generation plan is code: the pipeline from its Hugging Face
    repo in the GPU's 16-bit dtype, channels_last when the plan applies it, the plan's steps and size."""
    import ast

    w = workload_from_mapping(
        {"model": model, "task": "cv-inference", "precision": "fp16", "denoising_steps": steps, "gpu": gpu}
    )
    plan = make_plan(w)
    code = plan.config.snippets["diffusers"]
    ast.parse(code)
    final = plan.config.workload
    assert f'"{repo}"' in code and "torch.float16" in code
    default = 50  # both pipelines' default_steps in vision/data/architectures.toml
    assert f"num_inference_steps={steps or default}" in code
    assert f"height={final.image_size}" in code
    assert ("channels_last" in code) == final.channels_last
