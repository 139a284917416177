"""`gpuwise memory` and `gpuwise fit` end to end (real entry point, real exit codes)."""

from __future__ import annotations

import json

import pytest

from gpuwise.units import GiB


def test_memory_json_has_the_documented_keys(cli):
    r = cli("memory", "examples/llama-3-8b-lora.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["kind"] == "memory" and doc["schema_version"] == 2
    for key in (
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "device_total_bytes",
        "peak_phase",
        "breakdown_bytes",
        "phases",
        "gpu_memory_bytes",
        "headroom_pct",
        "fits",
    ):
        assert key in doc
    assert doc["peak_allocated_bytes"] <= doc["peak_reserved_bytes"] < doc["device_total_bytes"]
    assert sum(doc["breakdown_bytes"].values()) == pytest.approx(doc["device_total_bytes"], abs=16)
    assert doc["peak_phase"] in {p["name"] for p in doc["phases"]}


def test_memory_terminal_draws_the_breakdown_and_names_the_peak(cli):
    r = cli(
        "memory",
        "--model",
        "llama-3-8b",
        "--task",
        "qlora",
        "--precision",
        "nf4-dq",
        "--gpu",
        "rtx-4090",
        "--checkpointing",
        "full",
        "--batch",
        "1",
        "--seq",
        "1024",
    )
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "peak phase:" in out and "GiB" in out and "device total (nvidia-smi)" in out
    assert "24 GB on the datasheet" in out
    assert "█" in out  # bars are drawn


def test_max_batch_and_max_seq(cli):
    r = cli(
        "memory", "examples/llama-3-8b-lora.yaml", "--max-batch", "--max-seq", "--headroom", "20", "--json"
    )
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["max_batch"]["headroom_pct"] == 20 and doc["max_batch"]["value"] >= 1
    assert doc["max_seq_len"]["value"] >= 1
    text = cli("memory", "examples/llama-3-8b-lora.yaml", "--max-batch").stdout
    assert "largest batch on a100-80gb-sxm with 10 % headroom" in text


def test_memory_of_a_serving_workload_shows_the_kv_capacity(cli):
    # the serving figures are a plain paragraph: they have no "fits / does not fit" value to colour
    r = cli("memory", "examples/inference-7b.yaml", "--max-batch")
    assert r.exit_code == 0, r.stderr
    assert "KV cache holds" in r.stdout and "largest batch on" in r.stdout
    doc = cli("memory", "examples/inference-7b.yaml", "--json").json()
    assert "text" not in doc["serving"] and doc["serving"]["kv_capacity"]


def test_fit_json_and_terminal(cli):
    r = cli("fit", "examples/llama-3-8b-qlora-4090.yaml", "--json")
    assert r.exit_code == 0, r.stderr
    rows = r.json()["rows"]
    assert rows and rows == sorted(
        rows, key=lambda x: (x["num_gpus"], x["gpu_memory_bytes"], -x["headroom_pct"])
    )
    assert all(x["device_total_bytes"] <= x["gpu_memory_bytes"] for x in rows)
    text = cli("fit", "examples/llama-3-8b-qlora-4090.yaml").stdout
    assert "needs GiB" in text and "rtx-4090" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["memory", "--model", "llama-3-8b", "--gpu", "h100"], "did you mean 'h100-sxm'"),
        (["memory", "--model", "llama3-8b"], "unknown model 'llama3-8b': did you mean"),
        (["memory", "--model", "llama-3-8b", "--batch", "0"], "--batch must be a finite number ≥ 1"),
        (
            ["memory", "--model", "llama-3-8b", "--task", "lora", "--lora-rank", "8192"],
            "smaller than llama-3-8b's hidden size",
        ),
        (
            ["memory", "--model", "llama-3-8b", "--tp", "3", "--gpus", "3"],
            "does not divide llama-3-8b's 32 attention heads",
        ),
        (
            ["memory", "--model", "llama-3-8b", "--task", "full-finetune", "--precision", "nf4"],
            "cannot be fully fine-tuned",
        ),
        (
            ["memory", "--model", "llama-3-8b", "--task", "lora", "--set", "lora_targets=qq"],
            "unknown LoRA target 'qq'",
        ),
        (["memory", "--model", "resnet-50", "--task", "lora"], "no attention projections for LoRA"),
        (
            ["memory", "--model", "llama-3-8b", "--headroom", "100"],
            "--headroom must be a finite number ≥ 0 and < 100",
        ),
        (["memory", "--model", "llama-3-8b", "--model-factory", "x:y"], "need --traced"),
        (["memory", "--model", "llama-3-8b", "--traced", "--max-batch"], "drop --traced"),
        (["fit", "--model", "llama-3-8b", "--headroom", "-5"], "--headroom must be a finite number ≥ 0"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, args, message):
    r = cli(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_malformed_yaml_names_file_and_line(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: llama-3-8b\ntask: lora\nbatch_size: [1,\n")
    r = cli("memory", str(bad))
    assert r.exit_code == 2 and "bad.yaml" in r.stderr and "line" in r.stderr


def test_boolean_count_in_yaml_is_one_line_exit_2(cli, tmp_path):
    bad = tmp_path / "bool.yaml"
    bad.write_text("model: llama-3-8b\nbatch_size: true\n")
    r = cli("memory", str(bad))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "batch_size must be int, got True" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_config_json_missing_a_field_names_it(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8}
        )
    )
    r = cli("memory", "--model", str(cfg))
    assert r.exit_code == 2 and "vocab_size" in r.stderr


def test_local_config_json_is_estimated(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 512,
                "num_hidden_layers": 2,
                "num_attention_heads": 8,
                "num_key_value_heads": 2,
                "intermediate_size": 1376,
                "vocab_size": 32000,
            }
        )
    )
    r = cli("memory", "--model", str(cfg), "--task", "inference", "--json")
    assert r.exit_code == 0, r.stderr
    assert 0 < r.json()["peak_allocated_bytes"] < GiB


def test_debug_shows_the_traceback(cli):
    r = cli("--debug", "memory", "--model", "llama-3-8b", "--gpu", "h100")
    assert r.exit_code != 0 and "Traceback" in r.stderr


@pytest.mark.slow
def test_traced_mode_runs_the_simulator_and_agrees_with_the_analytic_estimate(cli, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 256,
                "num_hidden_layers": 2,
                "num_attention_heads": 8,
                "num_key_value_heads": 2,
                "intermediate_size": 688,
                "vocab_size": 1000,
            }
        )
    )
    args = ("memory", "--model", str(cfg), "--task", "lora", "--batch", "2", "--seq", "128", "--json")
    traced = cli(*args, "--traced", timeout=600)
    assert traced.exit_code == 0, traced.stderr
    analytic = cli(*args)
    t, a = traced.json(), analytic.json()
    assert t["kind"] == "memory_traced" and a["kind"] == "memory"
    assert t["peak_phase"] == a["peak_phase"] == "backward"
    assert a["peak_allocated_bytes"] / t["peak_allocated_bytes"] == pytest.approx(1.0, abs=0.25)


FACTORY = """
import torch
from torch import nn

def mlp():
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))

def batch(batch_size, seq_len, dtype):
    return torch.randn(batch_size, seq_len, 64, dtype=dtype)
"""


def test_a_model_factory_needs_no_catalog_model(cli, tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "user_models.py"
    path.write_text(FACTORY)
    args = (
        "--task",
        "pretrain",
        "--precision",
        "fp32",
        "--seq",
        "32",
        "--model-factory",
        f"{path}:mlp",
        "--input-factory",
        f"{path}:batch",
    )
    r = cli("memory", "--traced", *args, "--json")
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["kind"] == "memory_traced" and doc["num_params"] == 64 * 256 + 256 + 256 * 64 + 64
    assert doc["workload"]["model"] == "" and doc["workload"]["model_factory"] == f"{path}:mlp"
    # a workload file may name the factory instead of a model; the analytic estimate says it cannot use it
    spec = tmp_path / "job.yaml"
    spec.write_text(f"model_factory: {path}:mlp\ntask: pretrain\nprecision: fp32\n")
    analytic = cli("memory", str(spec))
    assert analytic.exit_code == 2 and "runs only with --traced" in analytic.stderr
    assert len(analytic.stderr.strip().splitlines()) == 1


def test_workload_without_model_or_factory_is_refused():
    from gpuwise.errors import GpuwiseError
    from gpuwise.memory import estimate_memory
    from gpuwise.workload import workload_from_mapping

    with pytest.raises(GpuwiseError, match="needs a model"):
        workload_from_mapping({"task": "pretrain"})
    w = workload_from_mapping({"model_factory": "pkg.models:build", "task": "pretrain"})
    assert w.model == "" and w.model_factory == "pkg.models:build"
    with pytest.raises(GpuwiseError, match="can only be simulated"):
        estimate_memory(w)
