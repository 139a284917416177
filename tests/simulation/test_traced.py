"""Traced (fake-tensor) memory simulation: tracker, FLOPs, categories, models, bad input."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count  # noqa: E402

from conftest import TINY_LLAMA_CONFIG  # noqa: E402
from gpuwise.errors import GpuwiseError  # noqa: E402
from gpuwise.simulation import traced_estimate  # noqa: E402
from gpuwise.simulation.flops import causal_fraction  # noqa: E402
from gpuwise.simulation.traced_estimate import simulate  # noqa: E402
from gpuwise.simulation.tracker import MemoryTracker, cuda_block_bytes  # noqa: E402
from gpuwise.workload import workload_from_mapping  # noqa: E402

TINY = TINY_LLAMA_CONFIG


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def workload(model: str, **values):
    return workload_from_mapping({"model": model, "seq": 64, "batch": 2, **values})


def rounded_param_bytes(model, buffers: bool = False) -> int:
    seen = {id(p): p for p in model.parameters()}
    if buffers:
        seen.update({id(b): b for b in model.buffers()})
    return sum(cuda_block_bytes(p.numel() * p.element_size()) for p in seen.values())


# -- the tracker itself ----------------------------------------------------------------------------
def test_tracker_counts_storages_once_rounds_like_cuda_and_frees():
    tracker = MemoryTracker()
    with FakeTensorMode(), tracker:
        with tracker.track_phase("forward") as record:
            a = torch.empty(1000)  # 4000 B -> one 4096 B block
            view = a.view(10, 100)  # shares a's storage: nothing new
            b = a * 2
            assert tracker.current_bytes == 2 * 4096
            del b
            c = torch.empty(0)  # no allocation at all
            assert tracker.current_bytes == 4096
        del a, view, c
    assert record.peak_bytes == 2 * 4096
    assert sum(record.live_at_peak.values()) == record.peak_bytes
    assert tracker.current_bytes == 0
    assert cuda_block_bytes(1) == 512 and cuda_block_bytes(513) == 1024 and cuda_block_bytes(0) == 0


def test_causal_fraction_is_exact_for_top_left_masks():
    assert causal_fraction(4, 4) == 10 / 16
    assert causal_fraction(8, 4) == (4 * 5 / 2 + 4 * 4) / 32
    assert causal_fraction(2, 6) == 3 / 12


# -- a training step on a tiny Llama ---------------------------------------------------------------------
def test_full_finetune_step_categories_and_adamw_foreach(tiny_config):
    sim = simulate(workload(tiny_config, task="full-finetune", precision="bf16"))
    phases = sim.tracker.phases
    params = rounded_param_bytes(sim.built.model)
    step = sim.tracker.breakdown(phases["optimizer_step"].live_at_peak)
    assert step["parameters"] == rounded_param_bytes(
        sim.built.model, buffers=True
    )  # + rotary inv_freq buffers
    assert step["gradients"] == params
    assert step["optimizer_state"] >= 2 * params  # exp_avg + exp_avg_sq in bf16 (+ 512 B step counters)
    assert step["temporaries"] == params  # foreach AdamW's sqrt(exp_avg_sq) copy of every state tensor
    forward = sim.tracker.breakdown(phases["forward"].live_at_peak)
    assert forward["gradients"] == 0  # zero_grad(set_to_none=True) in the steady state
    assert forward["optimizer_state"] == step["optimizer_state"]  # state exists from step 2 on
    assert forward["activations"] > 0 and forward["logits_loss"] > 0
    for record in phases.values():
        assert sum(record.live_at_peak.values()) == record.peak_bytes


def test_flops_count_matmuls_and_causal_attention_exactly(tiny_config):
    b, s = 2, 64
    sim = simulate(workload(tiny_config, task="full-finetune", precision="bf16"))
    h, i, layers, heads, kv, vocab = 128, 344, 4, 4, 2, 1024
    d = h // heads
    linear_params = layers * (h * h + 2 * h * kv * d + h * h + 3 * h * i) + h * vocab
    frac = causal_fraction(s, s)
    q, k = (b, heads, s, d), (b, kv, s, d)
    attn_fwd = int(sdpa_flop_count(q, k, k) * frac)
    attn_bwd = int(sdpa_backward_flop_count(q, q, k, k) * frac)
    assert sim.tracker.phases["forward"].flops == 2 * b * s * linear_params + layers * attn_fwd
    assert sim.tracker.phases["backward"].flops == 4 * b * s * linear_params + layers * attn_bwd


def test_gradient_accumulation_holds_gradients_through_the_forward(tiny_config):
    sim = simulate(workload(tiny_config, task="full-finetune", precision="bf16", grad_accum=4))
    forward = sim.tracker.breakdown(sim.tracker.phases["forward"].live_at_peak)
    assert forward["gradients"] == rounded_param_bytes(sim.built.model)


def test_ddp_keeps_a_flat_copy_of_the_gradients(tiny_config):
    sim = simulate(workload(tiny_config, task="full-finetune", precision="bf16", num_gpus=2, sharding="ddp"))
    forward = sim.tracker.breakdown(sim.tracker.phases["forward"].live_at_peak)
    numel = sum(p.numel() for p in sim.built.model.parameters())
    assert forward["gradients"] == cuda_block_bytes(2 * numel)  # one bf16 bucket, no .grad yet
    assert any("DDP gradient buckets" in n for n in sim.notes)


def test_checkpointing_cuts_saved_activations(tiny_config):
    plain = simulate(workload(tiny_config, task="full-finetune", precision="bf16"))
    full = simulate(workload(tiny_config, task="full-finetune", precision="bf16", grad_checkpointing="full"))
    acts = [
        s.tracker.breakdown(s.tracker.phases["forward"].live_at_peak)["activations"] for s in (plain, full)
    ]
    assert acts[1] < acts[0] / 3
    assert full.tracker.phases["backward"].flops > plain.tracker.phases["backward"].flops  # recompute counted


def test_lora_and_qlora(tiny_config):
    lora = traced_estimate(workload(tiny_config, task="lora", precision="bf16", lora_rank=8))
    per_layer = 8 * (128 + 128) + 8 * (128 + 64) * 2 + 8 * (128 + 128) + 8 * (128 + 344) * 2 + 8 * (344 + 128)
    assert lora.trainable_params == 4 * per_layer
    assert lora.breakdown["gradients"] < lora.breakdown["parameters"] / 10
    qlora = traced_estimate(workload(tiny_config, task="qlora", precision="nf4", lora_rank=8))
    assert qlora.trainable_params == lora.trainable_params
    assert any("accounted analytically" in n for n in qlora.notes)
    assert any("prepare_model_for_kbit_training" in n for n in qlora.notes)
    assert qlora.breakdown["parameters"] < lora.breakdown["parameters"]
    # LLaMA-Factory runs the same transformers + peft model but never calls prepare_model_for_kbit_training
    lf = traced_estimate(
        workload(tiny_config, task="qlora", precision="nf4", lora_rank=8, framework="llama-factory")
    )
    assert lf.trainable_params == qlora.trainable_params
    assert not any("prepare_model_for_kbit_training" in n or "analytic estimate only" in n for n in lf.notes)
    assert lf.breakdown["parameters"] < qlora.breakdown["parameters"]  # 16-bit embeddings, norms and head


def test_short_lora_target_names_map_to_the_models_modules(tiny_config):
    est = traced_estimate(
        workload(tiny_config, task="lora", precision="bf16", lora_rank=8, lora_targets="q,v")
    )
    assert est.trainable_params == 4 * (8 * (128 + 128) + 8 * (128 + 64))
    assert any("q_proj,v_proj" in n for n in est.notes)
    with pytest.raises(GpuwiseError, match="unknown LoRA target"):
        traced_estimate(workload(tiny_config, task="lora", lora_targets="attention_heads"))


def test_quantized_storage_sizes_follow_bitsandbytes():
    from gpuwise.simulation.quant import quantized_storage_bytes

    assert quantized_storage_bytes(4096, 64, "nf4", False) == {"weight": 2048, "absmax": 256}
    assert quantized_storage_bytes(4096 * 256, 64, "nf4", True) == {
        "weight": 4096 * 128,
        "absmax": 4096 * 4,
        "nested_absmax": 256,
    }
    assert quantized_storage_bytes(4096, 64, "int8", False) == {"weight": 4096, "scale": 256}


def test_paged_optimizer_state_is_outside_allocated(tiny_config):
    paged = traced_estimate(
        workload(tiny_config, task="full-finetune", precision="bf16", optimizer="paged-adamw-8bit")
    )
    plain = traced_estimate(
        workload(tiny_config, task="full-finetune", precision="bf16", optimizer="adamw-8bit")
    )
    assert paged.paged_state_bytes > 0 and paged.breakdown["optimizer_state"] == 0
    assert (
        paged.device_total_bytes
        == paged.peak_reserved_bytes + paged.cuda_context_bytes + paged.paged_state_bytes
    )
    assert plain.breakdown["optimizer_state"] > 0 and plain.paged_state_bytes == 0


def test_inference_prefill_and_decode_kv_cache(tiny_config):
    est = traced_estimate(workload(tiny_config, task="inference", precision="bf16", output_len=16))
    decode = next(p for p in est.phases if p.name == "decode")
    tokens = 64 + 16 - 1
    per_tensor = cuda_block_bytes(2 * 2 * 32 * tokens * 2)  # batch 2, 2 KV heads, head_dim 32, bf16
    replaced = cuda_block_bytes(
        2 * 2 * 32 * (tokens - 1) * 2
    )  # DynamicCache's torch.cat: old and new briefly coexist
    assert (
        4 * 2 * per_tensor <= decode.by_category["kv_cache"] <= 4 * 2 * per_tensor + replaced
    )  # 4 layers x (K, V)
    assert [p.name for p in est.phases] == ["prefill", "decode"]
    assert est.flops_per_step == est.flops_by_phase["prefill"] + 15 * est.flops_by_phase["decode"]


def test_result_has_the_analytic_keys_and_sums(tiny_config):
    from gpuwise.memory import estimate_memory

    w = workload(tiny_config, task="lora", precision="bf16")
    traced = traced_estimate(w).to_dict()
    analytic = estimate_memory(w).to_dict()
    assert set(analytic) <= set(traced)
    assert set(analytic["phases"][0]) <= set(traced["phases"][0])
    assert sum(traced["breakdown_bytes"].values()) == traced["device_total_bytes"]
    assert traced["top_activation_modules"] and traced["step_times"] and traced["flops_per_step"] > 0
    json.dumps(traced)


# -- user factories and bad input --------------------------------------------------------------------
FACTORIES = textwrap.dedent("""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(
                [nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)) for _ in range(3)]
            )
        def forward(self, x):
            for block in self.blocks:
                x = x + block(x)
            return x

    class Routed(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(64, 2)
        def forward(self, x):
            keep = (self.router(x).argmax(-1) == 0).nonzero()
            return x[keep]

    def net():
        return Net()

    def routed():
        return Routed()

    def broken():
        raise RuntimeError("weights file missing")

    def batch(batch_size, seq_len, dtype):
        return torch.randn(batch_size, seq_len, 64, dtype=dtype)
""")


@pytest.fixture
def factories(tmp_path):
    path = tmp_path / "user_models.py"
    path.write_text(FACTORIES)
    return str(path)


def test_factory_model_trains_with_its_input_factory(factories):
    est = traced_estimate(
        workload("llama-3-8b", task="pretrain", precision="fp32"),
        model_factory=f"{factories}:net",
        input_factory=f"{factories}:batch",
    )
    assert est.num_params == 3 * (64 * 256 + 256 + 256 * 64 + 64)
    assert [p.name for p in est.phases] == ["forward", "backward", "optimizer_step"]
    modules = {m["module"]: m for m in est.top_activation_modules}
    assert modules["blocks.*.0"]["instances"] == 3  # the layer index is folded


@pytest.mark.parametrize(
    "factory, inputs, message",
    [
        ("no_such_package.models:build", None, "cannot import module 'no_such_package.models'.*analytic"),
        ("{f}:broken", None, "raised RuntimeError: weights file missing.*analytic"),
        ("{f}:routed", "{f}:batch", r"Routed runs aten\.nonzero.*depends on tensor values.*analytic"),
        ("{f}:net", None, "pass --input-factory"),
        ("{f}:missing", None, "unknown callable"),
        ("not-a-spec", None, "must look like package.module:function"),
    ],
)
def test_bad_factories_get_one_clear_line(factories, factory, inputs, message):
    with pytest.raises(GpuwiseError, match=message) as err:
        traced_estimate(
            workload("llama-3-8b", task="pretrain", precision="fp32"),
            model_factory=factory.format(f=factories),
            input_factory=inputs and inputs.format(f=factories),
        )
    assert "\n" not in str(err.value)


def test_cli_traced_json_and_error_exit(cli, tiny_config, factories):
    ok = cli("memory", "--model", tiny_config, "--task", "lora", "--seq", "64", "--traced", "--json")
    assert ok.exit_code == 0, ok.stderr
    doc = ok.json()
    assert doc["kind"] == "memory_traced" and doc["method"] == "traced" and doc["peak_allocated_bytes"] > 0
    bad = cli(
        "memory",
        "--model",
        "llama-3-8b",
        "--task",
        "pretrain",
        "--traced",
        "--model-factory",
        f"{factories}:routed",
        "--input-factory",
        f"{factories}:batch",
    )
    assert bad.exit_code == 2
    assert bad.stderr.startswith("gpuwise: error: cannot simulate") and bad.stderr.count("\n") == 1


def test_a_workload_can_name_its_own_model_factory(factories):
    from gpuwise.workload import workload_from_mapping

    w = workload_from_mapping(
        {"model_factory": f"{factories}:net", "task": "cv-train", "precision": "fp32", "optimizer": "adamw"}
    )
    est = traced_estimate(w, input_factory=f"{factories}:batch")
    assert est.num_params == 3 * (64 * 256 + 256 + 256 * 64 + 64)
