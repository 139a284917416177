"""The accelerators users pick (issue 31, item 4) and the framework a workload runs (item 3): a JAX workload
is placed on a TPU by plan/memory/fit/cost with what is not modelled said once; a PyTorch workload on a TPU is
one line naming what to pass; JAX/TensorFlow plans give their own code and tools, never PyTorch's."""

from __future__ import annotations

import pytest

from gpuwise.catalog import get_gpu, list_gpus
from gpuwise.errors import GpuwiseError
from gpuwise.workload import workload_from_mapping
from gpuwise.workload.ml_framework import TPU_MODELLED, ml_framework, placement_issue

PYTORCH_WORDS = ("torch", "TrainingArguments", "peft", "DataLoader", "deepspeed", "vllm serve")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        *[("", "pytorch"), ("hf-trainer", "pytorch"), ("vllm", "pytorch"), ("JAX", "jax"), ("flax", "jax")],
        *[("maxtext", "jax"), ("tensorflow", "tensorflow"), ("keras", "tensorflow"), ("tf", "tensorflow")],
    ],
)
def test_framework_names(name, expected):
    assert ml_framework(name) == expected


def test_what_runs_where():
    tpus = [g for g in list_gpus() if g.platform == "tpu"]
    assert {g.id for g in tpus} == {"tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7"}
    for gpu in tpus:
        assert placement_issue("jax", gpu) is None and placement_issue("tensorflow", gpu) is None
        issue = placement_issue("hf-trainer", gpu)
        assert issue and gpu.id in issue and "--framework jax" in issue and "\n" not in issue
    gaudi = get_gpu("gaudi3")
    assert placement_issue("", gaudi) is None and "Gaudi" in (placement_issue("jax", gaudi) or "")
    for gpu_id in ("h100-sxm", "mi355x", "b300", "rtx-5080"):
        assert all(placement_issue(f, get_gpu(gpu_id)) is None for f in ("", "jax", "tensorflow"))


def test_a_pytorch_workload_on_a_tpu_is_refused_in_one_line():
    with pytest.raises(GpuwiseError, match=r"tpu-v6e is a Google TPU.*--framework jax"):
        workload_from_mapping({"model": "llama-3-8b", "gpu": "tpu-v6e"})


@pytest.mark.parametrize("command", ["plan", "memory", "cost"])
def test_cli_pytorch_on_tpu_is_one_line_exit_2(cli, command):
    res = cli(command, "-m", "llama-3-8b", "-t", "inference", "-g", "tpu-v5e")
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: tpu-v5e is a Google TPU"), res.stderr


def test_plan_places_a_jax_workload_on_a_tpu(cli):
    res = cli(
        "plan", "-m", "llama-3-8b", "-t", "lora", "-g", "tpu-v5p", "--framework", "jax", "--json", timeout=300
    )
    assert res.exit_code == 0, res.stderr
    plan = res.json()["plan"]
    current = plan["current"]
    assert current["gpu"] == "tpu-v5p" and current["fits"] and current["throughput_per_s"] > 0
    # 41 GiB of the 95 GiB (102 GB) a v5p chip gives JAX; speed from its 459 TFLOPS bf16 peak
    assert current["capacity_bytes"] == pytest.approx(get_gpu("tpu-v5p").memory_gb * 2**30, rel=0.01)
    assert 0 < current["mfu_pct"] < 100
    assert TPU_MODELLED in plan["notes"]
    snippets = plan["config"]["snippets"]
    assert set(snippets) == {"workload.yaml", "JAX (jax.jit + jax.sharding + optax)"}
    code = snippets["JAX (jax.jit + jax.sharding + optax)"]
    assert "donate_argnums" in code and "NamedSharding" in code and "optax.masked" in code
    text = " ".join(snippets.values()) + " ".join(t["name"] + t["why"] for t in plan["tools"])
    assert not any(word in text for word in PYTORCH_WORDS), text
    assert not any(
        t["changes"].get("optimizer", {}).get("to") in {"adamw-fused", "adamw-8bit"} or "task" in t["changes"]
        for t in plan["techniques"]
    )  # no fused torch AdamW, bitsandbytes or QLoRA for JAX


def test_plan_tensorflow_gives_keras_code(cli):
    res = cli(
        "plan", "-m", "llama-3.2-1b", "-t", "full-finetune", "-g", "h100-sxm", "--framework", "tensorflow",
        "--json", timeout=300,
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    snippets = res.json()["plan"]["config"]["snippets"]
    code = snippets["TensorFlow / Keras"]
    assert "mixed_precision.set_global_policy('mixed_bfloat16')" in code and "jit_compile=True" in code
    assert "prefetch(tf.data.AUTOTUNE)" in code
    assert not any(w in " ".join(snippets.values()) for w in PYTORCH_WORDS)


def test_memory_and_cost_on_a_tpu(cli):
    mem = cli(
        "memory", "-m", "llama-3-8b", "-t", "inference", "-g", "tpu-v6e", "--framework", "jax", "--json"
    )
    assert mem.exit_code == 0, mem.stderr
    doc = mem.json()
    assert TPU_MODELLED in str(doc)
    cost = cli("cost", "-m", "llama-3-8b", "-t", "inference", "-g", "tpu-v6e", "--framework", "jax", "--json")
    assert cost.exit_code == 0, cost.stderr
    assert "2.7" in cost.stdout and "Google Cloud us-central1" in cost.stdout  # $2.70 per chip-hour


def test_gpus_lists_the_added_accelerators_with_sources(cli):
    res = cli("gpus", "--json")
    assert res.exit_code == 0, res.stderr
    rows = {g["id"]: g for g in res.json()["gpus"]}
    added = ["b300", "gb300", "mi350x", "mi355x", "h20", "l20", "rtx-3090", "rtx-3090-ti", "rtx-4080"]
    added += [
        "rtx-4070-ti-super",
        "rtx-5080",
        "rtx-5070-ti",
        "gaudi3",
        "tpu-v5e",
        "tpu-v5p",
        "tpu-v6e",
        "tpu-v7",
    ]
    for gid in added:
        row = rows[gid]
        assert row["spec_source"] and row["confidence"] in {
            "official",
            "secondary",
            "derived",
            "uncertain",
        }, gid
        assert row["memory_gb"] > 0 and row["mem_bw_tbps"] > 0 and row["bf16_tflops"], gid
        assert row["cloud_usd_per_hr"] or row["price_source"], gid  # a price, or why there is none
    assert rows["tpu-v7"]["bf16_tflops"] == 2307 and rows["tpu-v7"]["fp8_tflops"] == 4614
    assert rows["tpu-v6e"]["nvlink_gbps"] == 800  # ICI, bidirectional per chip
    shown = cli("gpus", "tpu-v6e")
    assert shown.exit_code == 0 and "docs.cloud.google.com/tpu/docs/v6e" in shown.stdout.replace("\n", "")


def test_fp32_on_accelerators_without_an_fp32_figure():
    """A TPU runs an fp32 dot as one bf16 MXU pass (XLA's DEFAULT precision); Gaudi 3's datasheet gives no
    fp32 figure: one line naming the precision to use, and the planner's port moves fp32 to amp-bf16."""
    from gpuwise.perf import predict
    from gpuwise.perf.numerics import supported_dtype
    from gpuwise.plan.hardware import port

    assert supported_dtype(get_gpu("tpu-v6e"), "fp32") == "bf16"
    w = workload_from_mapping({"model": "llama-3-8b", "task": "inference", "precision": "fp32"})
    with pytest.raises(GpuwiseError, match=r"gaudi3 lists no peak for fp32.*--precision amp-bf16"):
        predict(w, get_gpu("gaudi3"))
    moved = port(w, get_gpu("gaudi3"))
    assert moved is not None and moved.precision == "amp-bf16"
