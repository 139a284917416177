"""Every example under examples/ produces a sensible plan, checked for what each example is about."""

from pathlib import Path

import pytest

from gpuwise.catalog import get_gpu
from gpuwise.catalog.gpus import clear_cache
from gpuwise.plan import make_plan
from gpuwise.plan.goal import comfortable
from gpuwise.workload import load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Examples whose plan needs a feature another part of issue 13 adds; each joins ALL once it is merged.
ALL = sorted(EXAMPLES.glob("*.yaml"))  # every one runs on the bundled catalog alone (no user GPU file)


@pytest.fixture(scope="module", autouse=True)
def bundled_catalog_only():
    """No user GPU file: every GPU an example names is in the bundled catalog."""
    mp = pytest.MonkeyPatch()
    mp.delenv("GPUWISE_GPUS", raising=False)
    clear_cache()
    yield
    mp.undo()
    clear_cache()


_plans: dict[str, object] = {}


def plan(name: str):
    if name not in _plans:
        _plans[name] = make_plan(load_workload(EXAMPLES / f"{name}.yaml"))
    return _plans[name]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_every_example_gives_a_complete_plan_that_fits(path):
    p = plan(path.stem)
    assert comfortable(p.config.outcome), f"{path.stem}: the recommended config must fit with headroom"
    assert p.config.outcome.throughput and p.config.outcome.throughput > 0
    assert p.diagnosis.summary and p.scaling.strategy and p.tools
    assert p.memory.current["breakdown_bytes"]
    assert any(comfortable(h.outcome) for h in p.hardware)
    for t in p.recommended:  # every recommended line is computed: it fits, or it saves memory toward a fit
        assert t.reason and (t.after.fits or t.impact.memory_saved_bytes > 0)
    if (
        p.config.global_batch_before is not None
        and p.config.global_batch_after != p.config.global_batch_before
    ):
        assert any(t.quality_risk == "changes-training" for t in p.recommended)


def test_qlora_70b_on_one_gpu_picks_a_gpu_that_fits():
    p = plan("qlora-70b-1gpu")
    assert not p.current.fits  # 24 GB RTX 4090 is too small for 70B NF4 weights
    moved = p.config.workload
    assert moved.num_gpus == 1 and moved.gpu != "rtx-4090" and moved.task == "qlora"
    assert get_gpu(moved.gpu).memory_gb > 24 and comfortable(p.config.outcome)
    top = p.hardware[0]
    assert top.num_gpus == 1 and comfortable(top.outcome)
    assert "rtx-4090" in p.config.note


def test_pretraining_on_8_h100_names_sharding_and_nvlink():
    p = plan("pretrain-8xh100")
    s = p.scaling
    assert s.num_gpus == 8 and ("FSDP" in s.strategy or "ZeRO" in s.strategy)
    assert "NVLink" in s.nvlink_reason and s.nvlink_slowdown_pct is not None
    assert p.config.workload.sharding in {"fsdp", "zero2", "zero3"}
    assert {"PyTorch FSDP2 (fully_shard)", "DeepSpeed ZeRO"} & {t.name for t in p.tools}
    assert p.config.outcome.usd_per_run and p.config.outcome.run_time_s  # 100B tokens: $ and days of the run
    assert "launch" in p.config.snippets and "--nproc_per_node=8" in p.config.snippets["launch"]


def test_low_utilization_job_lists_input_and_small_batch_causes():
    p = plan("low-utilization-40pct")
    ids = {f.id for f in p.diagnosis.findings}
    assert {"low_utilization", "no_mixed_precision"} <= ids
    # ViT-B/16 at 32 images already fills an A10 in the model (4x the batch: ~1.04x), so the stated 40 %
    # is not blamed on the batch; the cause is listed as ruled out, with the model's figure
    assert "small_batch" not in ids
    causes = {c.id: c for c in p.diagnosis.idle_causes}
    assert (
        causes["input_bound"].status == "not-measured"
        and "gpuwise profile" in causes["input_bound"].how_to_check
    )
    assert causes["small_batch"].status == "ruled-out" and "predicts 1.0" in causes["small_batch"].detail
    assert "mixed_precision" in p.config.applied
    assert {"NVIDIA DALI", "gpuwise profile"} <= {t.name for t in p.tools}


def test_rag_at_32k_on_8gb_versus_24gb():
    small, big = plan("rag-32k-8gb"), plan("rag-32k-24gb")
    assert not small.current.fits and small.workload.gpu == "rtx-4060"
    context = [o for o in small.fit.options if o.gpu == "rtx-4060" and "seq_len" in o.changes]
    assert context and context[0].changes["seq_len"] < 32768 and comfortable(context[0].outcome)
    assert small.config.workload.gpu != "rtx-4060"  # 32k context needs a bigger GPU
    assert "llama.cpp" in {t.id for t in small.tools}
    assert big.config.workload.gpu == "l4" and comfortable(big.config.outcome)
    assert big.config.workload.kv_cache_dtype == "fp8" or big.config.workload.precision in {
        "fp8",
        "int8",
        "int4",
    }
    assert "--enable-prefix-caching" in big.config.snippets["vLLM"]


def test_13b_on_a10g_is_quantized_to_fit():
    p = plan("inference-13b")
    assert not p.current.fits and p.config.workload.gpu == "a10g"
    assert p.config.workload.precision in {"int8", "int4"}  # A10G has no FP8 tensor cores
    assert "--quantization" in p.config.snippets["vLLM"]


def test_7b_serving_for_cost_lowers_cost_per_token():
    p = plan("inference-7b")
    assert p.config.outcome.usd_per_1m < p.current.usd_per_1m
    assert "vllm" in {t.id for t in p.tools}


def test_full_and_lora_finetunes_fit_their_gpus():
    full, lora = plan("full-finetune-7b"), plan("lora-7b")
    assert full.config.workload.task == "full-finetune" and full.config.workload.gpu == "a100-80gb-sxm"
    assert lora.config.workload.gpu == "a10g" and lora.config.workload.grad_checkpointing != "none"
    assert lora.config.global_batch_after == lora.config.global_batch_before


def test_vit_training_turns_on_mixed_precision_and_keeps_ddp():
    p = plan("vit-training")
    assert p.config.workload.precision == "amp-bf16"
    assert p.scaling.strategy.startswith("DDP") and p.scaling.num_gpus == 4


def test_every_example_renders_through_the_cli(cli):
    from concurrent.futures import ThreadPoolExecutor

    env = {k: v for k, v in __import__("os").environ.items() if k != "GPUWISE_GPUS"}
    # two children at a time: 27 fresh processes, and the test runner itself leaves a core idle meanwhile
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda path: cli("plan", str(path), "--markdown", env=env), ALL))
    for path, result in zip(ALL, results, strict=True):
        assert result.exit_code == 0, f"{path.name}: {result.stderr}"
        if path.name.startswith("serving-"):  # a demand and an SLO: the serving plan (docs/serving.md)
            assert "Cheapest meeting the SLO" in result.stdout and "## 2. Techniques" in result.stdout
            continue
        assert "## 6. Tools" in result.stdout and "## 4. VRAM per GPU" in result.stdout


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_every_snippet_parses_and_the_yaml_is_the_recommended_workload(path, tmp_path):
    import json
    import subprocess

    import yaml

    from gpuwise.workload import workload_from_mapping

    p = plan(path.stem)
    for label, text in p.config.snippets.items():
        if label == "workload.yaml":
            assert workload_from_mapping(yaml.safe_load(text)) == p.config.workload
        elif label.endswith(".json"):
            json.loads(text)
        elif label in {"vLLM", "launch"} or label.startswith("Megatron-LM"):  # shell command lines
            script = tmp_path / "cmd.sh"
            script.write_text(text)
            assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, text
        else:
            compile(text, label, "exec")  # Python: HF Trainer + PEFT, PyTorch loop, FSDP2


def test_70b_lora_that_ooms_on_two_a100s_is_made_to_fit_there():
    p = plan("lora-70b-2xa100-oom")
    assert not p.current.fits and p.diagnosis.findings[0].id == "oom_risk"
    final = p.config.workload
    assert (final.gpu, final.num_gpus) == ("a100-80gb-sxm", 2) and comfortable(p.config.outcome)
    assert final.grad_checkpointing == "full" and final.sharding in {"fsdp", "zero3"}
    assert p.config.global_batch_after == p.config.global_batch_before == 32
    assert p.techniques[0].needed_to_fit  # what makes it fit comes first
    if final.task == "qlora":  # FSDP-QLoRA: 4-bit weights packed in the dtype FSDP shards
        assert "bnb_4bit_quant_storage=torch.bfloat16" in p.config.snippets["Hugging Face Trainer + PEFT"]


def test_70b_pretraining_on_64_h100s_keeps_its_global_batch():
    p = plan("pretrain-70b-64xh100")
    assert p.scaling.num_gpus == 64 and p.config.global_batch_after == 1024
    assert p.config.outcome.mfu_pct and p.config.outcome.mfu_pct > 25
    final = p.config.workload
    if final.pp > 1:  # TP x PP: Megatron-LM's pretrain_gpt.py launched with torchrun on each of the 8 nodes
        assert "--nnodes=8" in p.config.snippets["Megatron-LM pretrain_gpt.py"]
    else:  # FSDP (x TP inside a node): the 2-D mesh in the FSDP2 block, torchrun on each of the 8 nodes
        assert "--nnodes=8" in p.config.snippets["launch"]
        assert (final.tp > 1) == ("parallelize_module(block" in p.config.snippets["PyTorch FSDP2"])


def test_startup_8xh100_node_plans_its_monthly_run():
    p = plan("startup-8xh100-buy-or-rent")
    assert p.scaling.num_gpus == 8 and p.config.workload.sharding in {"fsdp", "zero2", "zero3", "ddp"}
    out = p.config.outcome
    assert out.usd_per_run and out.run_time_s and out.run_time_s < 31 * 86400  # 20B tokens fit in a month
    assert not p.scaling.hold_back  # nothing says the node idles: scaling advice is not held back


def test_startup_buy_vs_rent_answers_the_budget_in_the_plan_and_its_json():
    p = plan("startup-8xh100-buy-or-rent")
    tco = p.scaling.tco
    assert tco is not None and tco.inputs.monthly_budget_usd == 20_000 and tco.inputs.num_gpus == 8
    assert tco.own is not None and tco.option("on_demand") is not None
    assert tco.break_even_utilization_pct is not None and tco.cheapest is not None
    assert all(o.within_budget is not None for o in tco.options if o.monthly_usd is not None)
    data = p.to_dict()["scaling"]["tco"]
    assert data["inputs"]["monthly_budget_usd"] == 20_000 and data["verdict"] == tco.verdict


def test_resnet50_at_40pct_fixes_the_pipeline_before_buying():
    p = plan("resnet50-40pct")
    assert p.techniques[0].id == "fix_pipeline" and p.scaling.hold_back and p.scaling.num_gpus == 1
    amp = next(t for t in p.techniques if t.id == "mixed_precision")
    assert p.config.workload.precision in {"amp-bf16", "amp-fp16"}
    assert amp.capped_throughput_x is not None and amp.capped_throughput_x < amp.impact.throughput_x
    assert {"NVIDIA DALI", "gpuwise profile"} <= {t.name for t in p.tools}
    assert not {"lora", "qlora", "flash_attention"} & {t.id for t in p.techniques}
