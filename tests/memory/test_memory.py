"""Analytic memory estimator: each term against hand-computed values, phases, sharding, overheads."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from gpuwise.catalog import get_gpu, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.memory import (
    COMPONENTS,
    allocator_reserve_bytes,
    cuda_context_bytes,
    estimate_memory,
    kv_cache_bytes,
    lora_params,
    quantized_bytes_per_param,
    weight_bytes,
)
from gpuwise.memory.activations import layer_activations
from gpuwise.memory.frameworks import profile_for
from gpuwise.memory.regime import regime_for
from gpuwise.memory.weights import param_groups
from gpuwise.units import GiB
from gpuwise.workload import workload_from_mapping

LLAMA3_8B = 8_030_261_248
LLAMA3_8B_BLOCK_MATRICES = 32 * (4096 * (4096 + 1024 + 1024 + 4096) + 3 * 4096 * 14336)


def W(**kw):
    return workload_from_mapping({"model": "llama-3-8b", **kw})


# ---- parameters and weights ---------------------------------------------------------------------


def test_llama3_8b_parameter_groups_are_exact():
    g = param_groups(get_model("llama-3-8b"))
    assert g.total == LLAMA3_8B
    assert g.block_matrices == LLAMA3_8B_BLOCK_MATRICES == 6_979_321_856
    assert g.embedding == g.lm_head == 128_256 * 4096
    assert g.block_other + g.final_norm == 32 * 2 * 4096 + 4096  # RMSNorm weights


def test_bf16_weights_are_two_bytes_per_parameter():
    w = W(task="inference", precision="bf16")
    assert weight_bytes(get_model("llama-3-8b"), w, regime_for(w), profile_for("")) == 2 * LLAMA3_8B


@pytest.mark.parametrize(
    "precision, double_quant, expected",
    [
        ("nf4", False, 0.5 + 4 / 64),  # 4-bit codes + one fp32 absmax per block of 64
        ("int4", False, 0.5625),
        ("nf4", True, 0.5 + 1 / 64 + 4 / (64 * 256)),  # absmax as int8 per 64, one fp32 scale per 256 absmax
        ("int8", False, 1 + 4 / 4096),  # LLM.int8: 1 byte + fp32 row scale
    ],
)
def test_quantized_layouts(precision, double_quant, expected):
    assert quantized_bytes_per_param(precision, double_quant, 4096) == pytest.approx(expected)


def test_nf4_keeps_embeddings_and_lm_head_in_16_bit_like_bitsandbytes():
    w = W(task="inference", precision="nf4")
    got = weight_bytes(get_model("llama-3-8b"), w, regime_for(w), profile_for("hf"))
    expected = LLAMA3_8B_BLOCK_MATRICES * 0.5625 + (LLAMA3_8B - LLAMA3_8B_BLOCK_MATRICES) * 2
    assert got == pytest.approx(expected)


def test_litgpt_quantizes_the_head_and_keeps_its_own_copy_of_tied_embeddings():
    arch = get_model("falcon-7b")  # tied in Hugging Face, untied in LitGPT's GPT
    hf = workload_from_mapping({"model": "falcon-7b", "task": "inference", "precision": "bf16"})
    lit = workload_from_mapping(
        {"model": "falcon-7b", "task": "inference", "precision": "bf16", "framework": "litgpt"}
    )
    head = arch.vocab_size * arch.hidden_size
    assert (
        weight_bytes(arch, lit, regime_for(lit), profile_for("litgpt"))
        - weight_bytes(arch, hf, regime_for(hf), profile_for("hf"))
        == 2 * head
    )


# ---- LoRA ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, expected",
    [
        # LitGPT resource tables (commit 8641822), "Trainable parameters" for r=8 on q and v
        ("llama-2-7b", 4_194_304),
        ("llama-2-13b", 6_553_600),
        ("phi-1.5", 1_572_864),
        ("stablelm-alpha-3b", 2_097_152),
        ("falcon-40b", 12_042_240),  # GQA: v projects to 8 KV heads x 64
    ],
)
def test_lora_parameter_counts_match_published_figures(model, expected):
    assert lora_params(get_model(model), ("q", "v"), 8) == expected


def test_lora_all_linear_by_hand():
    per_layer = 16 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096) + 3 * (4096 + 14336))
    assert lora_params(get_model("llama-3-8b"), ("all-linear",), 16) == 32 * per_layer == 41_943_040
    assert lora_params(get_model("llama-3-8b"), ("q_proj", "v_proj"), 16) == lora_params(
        get_model("llama-3-8b"), ("q", "v"), 16
    )


def test_unknown_lora_target_is_one_clear_line():
    with pytest.raises(GpuwiseError, match="unknown LoRA target 'qq'"):
        lora_params(get_model("llama-3-8b"), ("qq",), 8)


# ---- KV cache -----------------------------------------------------------------------------------


def test_gqa_kv_cache_by_hand():
    arch = get_model("llama-3-8b")  # 32 layers, 8 KV heads of 128
    w = W(task="inference", seq_len=8192)
    assert kv_cache_bytes(arch, w, 8192, 1) == 2 * 32 * 8 * 128 * 8192 * 2 == GiB
    assert kv_cache_bytes(arch, W(task="inference", kv_cache_dtype="fp8"), 8192, 1) == GiB / 2
    assert kv_cache_bytes(arch, W(task="inference", tp=2, num_gpus=2), 8192, 1) == GiB / 2
    mha = get_model("llama-2-7b")  # 32 KV heads: four times the per-token cache
    assert (
        kv_cache_bytes(mha, workload_from_mapping({"model": "llama-2-7b", "task": "inference"}), 1, 1)
        == 4 * 2 * 32 * 8 * 128 * 2
    )


def test_inference_kv_covers_prompt_and_generated_tokens():
    e = estimate_memory(W(task="inference", batch_size=4, seq_len=1000, output_len=24))
    assert e.phase("decode").components["kv_cache"] == 4 * 1024 * 2 * 32 * 8 * 128 * 2
    assert e.phase("prefill").components["kv_cache"] == 4 * 1000 * 2 * 32 * 8 * 128 * 2


# ---- optimizer, gradients, precision ---------------------------------------------------------------


def test_pure_bf16_adamw_foreach_step_matches_the_simulated_reference():
    e = estimate_memory(W(task="full-finetune", precision="bf16", batch_size=1, seq_len=2048))
    step = e.phase("optimizer_step").components
    assert step["weights"] == step["gradients"] == step["temporaries"] == 2 * LLAMA3_8B
    assert step["optimizer_states"] == 4 * LLAMA3_8B
    assert e.peak_phase == "optimizer_step"
    # gpuwise's traced simulation of the same step (foreach AdamW) peaks at 75.28 GiB
    assert e.peak_allocated_bytes / GiB == pytest.approx(75.28, rel=0.02)


def test_fused_adamw_has_no_step_temporary():
    e = estimate_memory(W(task="full-finetune", precision="bf16", optimizer="adamw-fused"))
    assert e.phase("optimizer_step").components.get("temporaries", 0) == 0


def test_amp_keeps_fp32_weights_state_and_16bit_weight_copies():
    e = estimate_memory(W(task="full-finetune", precision="amp-bf16"))
    fwd = e.phase("forward").components
    assert fwd["weights"] == 4 * LLAMA3_8B and fwd["optimizer_states"] == 8 * LLAMA3_8B
    matrices = LLAMA3_8B_BLOCK_MATRICES + 128_256 * 4096
    assert fwd["autocast_weight_copies"] == 2 * matrices


def test_autocast_copies_of_frozen_weights_in_lora_and_qlora():
    head = 128_256 * 4096
    # fp32 base under amp-bf16: a fresh 16-bit copy of every frozen matrix, kept until its backward
    lora = estimate_memory(W(task="lora", precision="amp-bf16"))
    assert lora.phase("forward").components["autocast_weight_copies"] == 2 * (LLAMA3_8B_BLOCK_MATRICES + head)
    ckpt = estimate_memory(W(task="lora", precision="amp-bf16", grad_checkpointing="full"))
    assert ckpt.phase("forward").components["autocast_weight_copies"] == 2 * head  # blocks recompute theirs
    # QLoRA after prepare_model_for_kbit_training: only the fp32 lm_head is cast (0.98 GiB on Llama-3-8B)
    q = estimate_memory(W(task="qlora", precision="nf4", grad_checkpointing="full"))
    assert q.phase("forward").components["autocast_weight_copies"] == 2 * head
    assert not q.phase("optimizer_step").components.get("autocast_weight_copies")
    # pure bf16 LoRA: nothing is cast
    assert not estimate_memory(W(task="lora")).phase("forward").components.get("autocast_weight_copies")


def test_llama_factory_qlora_skips_peft_kbit_preparation():
    # LLaMA-Factory prepares the model itself (no prepare_model_for_kbit_training): embeddings, lm_head and
    # the residual stream stay 16-bit, so no autocast copy of an fp32 head and a smaller step than peft's
    arch = get_model("llama-3-8b")
    hf = W(task="qlora", precision="nf4", grad_checkpointing="full")
    lf = W(task="qlora", precision="nf4", grad_checkpointing="full", framework="llama-factory")
    assert not profile_for("llama-factory").kbit_upcast and profile_for("hf").kbit_upcast
    lf_est, hf_est = estimate_memory(lf), estimate_memory(hf)
    assert not lf_est.phase("forward").components.get("autocast_weight_copies")
    # the 16-bit embedding and head: 2 bytes a parameter instead of 4
    hf_w = weight_bytes(arch, hf, regime_for(hf), profile_for("hf"))
    lf_w = weight_bytes(arch, lf, regime_for(lf), profile_for("llama-factory"))
    assert hf_w - lf_w == 2 * (2 * 128_256 * 4096 + 65 * 4096)
    assert lf_est.peak_allocated_bytes < hf_est.peak_allocated_bytes
    # the LoRA recipe itself (bf16 base) is unchanged
    lora = W(task="lora", grad_checkpointing="full")
    lf_lora = estimate_memory(W(task="lora", grad_checkpointing="full", framework="llama-factory"))
    lf_lora = lf_lora.peak_allocated_bytes
    assert lf_lora == estimate_memory(lora).peak_allocated_bytes


def test_quantized_linears_keep_inputs_as_their_library_does():
    arch = get_model("llama-3-8b")

    def saved(precision, framework="hf", versions=()):
        w = W(task="qlora", precision=precision, framework=framework)
        return layer_activations(
            arch, w, regime_for(w), profile_for(framework, versions), 1, 2048
        ).saved_bytes

    t, h, i = 2048, 4096, 14336
    # bitsandbytes < 0.43.2 kept each 4-bit matmul's 16-bit cast of its fp32 input (q, k, v, gate, up, down;
    # o's input is SDPA's 16-bit output, kept anyway); 0.43.2+ keeps none
    old_inputs = 2 * t * (3 * h + 2 * h + i)
    assert saved("nf4", versions=("bitsandbytes==0.43.1",)) - saved("nf4") == old_inputs
    # LLM.int8 keeps its input as given (the fp32 residual stream after prepare_model_for_kbit_training)
    assert saved("int8") > saved("nf4")
    # torchtune's NF4 (torchao linear_nf4) keeps only the weight whatever the bitsandbytes version
    assert saved("nf4", "torchtune", ("bitsandbytes==0.41.0",)) == saved("nf4", "torchtune")


def test_master_weights_with_zero_and_not_with_plain_bf16():
    assert estimate_memory(W(task="full-finetune", precision="bf16")).breakdown["master_weights"] == 0
    z = estimate_memory(W(task="full-finetune", precision="bf16", sharding="zero1", num_gpus=8))
    assert z.phase("optimizer_step").components["master_weights"] == pytest.approx(4 * LLAMA3_8B / 8)


def test_8bit_and_paged_optimizers():
    eight = (
        estimate_memory(W(task="full-finetune", optimizer="adamw-8bit")).phase("optimizer_step").components
    )
    assert eight["optimizer_states"] == 2 * LLAMA3_8B
    paged = estimate_memory(W(task="full-finetune", optimizer="paged-adamw-8bit"))
    assert (
        paged.phase("optimizer_step").components["optimizer_states"] == 0
    )  # unified memory: not in torch stats
    assert paged.breakdown["optimizer_states"] == 2 * LLAMA3_8B  # but nvidia-smi sees it
    assert paged.device_total_bytes - paged.peak_reserved_bytes > 2 * LLAMA3_8B


def test_lora_adapters_carry_their_gradients_and_state():
    e = estimate_memory(W(task="lora", lora_rank=16, lora_targets="all-linear", lora_dtype="fp32"))
    n = 41_943_040
    assert e.phase("optimizer_step").components["lora_adapters"] == n * (4 + 4 + 8)
    assert e.phase("optimizer_step").components.get("gradients", 0) == 0
    # zero_grad(set_to_none=True): no adapter gradients during the forward, unless accumulating
    assert e.phase("forward").components["lora_adapters"] == n * (4 + 8)
    acc = estimate_memory(W(task="lora", lora_rank=16, lora_targets="all-linear", grad_accum=2))
    assert acc.phase("forward").components["lora_adapters"] == n * (4 + 4 + 8)


def test_gradients_stay_allocated_between_steps_before_torch_2():
    new = estimate_memory(W(task="full-finetune", precision="bf16"))
    old = estimate_memory(W(task="full-finetune", precision="bf16", library_versions="torch==1.13"))
    assert new.phase("forward").components.get("gradients", 0) == 0
    assert old.phase("forward").components["gradients"] == 2 * LLAMA3_8B  # zero_grad(set_to_none=False)


# ---- activations ---------------------------------------------------------------------------------


def test_activations_scale_with_tokens_and_shrink_with_recompute():
    def acts(**kw):
        return estimate_memory(W(task="full-finetune", **kw)).phase("forward").components["activations"]

    assert acts(batch_size=2) == pytest.approx(2 * acts(batch_size=1), rel=1e-6)
    full = acts(grad_checkpointing="full")
    assert full < acts() / 10
    assert full == pytest.approx(acts(grad_checkpointing="full", batch_size=2) / 2, rel=1e-6)


def test_flash_attention_saves_no_scores_and_eager_does():
    arch = get_model("llama-3-8b")

    def per_layer(attn):
        w = W(task="full-finetune", attention=attn)
        return layer_activations(arch, w, regime_for(w), profile_for(""), 1, 4096).saved_bytes

    scores = 32 * 4096 * 4096  # heads x seq x seq, per sample
    expanded_kv = 2 * 2 * 4096 * (4096 - 1024)  # K and V repeated from 8 to 32 heads, bf16
    # eager: fp32 softmax + bf16 probs, and repeat_kv before its matmuls; SDPA takes GQA natively
    assert per_layer("eager") - per_layer("sdpa") == pytest.approx(6 * scores + expanded_kv, rel=1e-3)
    assert per_layer("flash") == per_layer("sdpa")


def test_sdpa_expands_gqa_kv_only_before_transformers_4_54():
    arch = get_model("llama-3-8b")
    w = W(task="full-finetune")

    def per_layer(*versions):
        return layer_activations(arch, w, regime_for(w), profile_for("hf", versions), 1, 4096).saved_bytes

    expanded_kv = 2 * 2 * 4096 * (4096 - 1024)
    assert per_layer("transformers==4.53") - per_layer() == expanded_kv
    assert per_layer("transformers==4.54.0") == per_layer()
    # the estimate says what a padded batch (which still expands K/V) would add
    note = next(
        a for a in estimate_memory(W(task="full-finetune", seq_len=4096)).assumptions if "GQA natively" in a
    )
    assert f"+{32 * expanded_kv / GiB:.2f} GiB" in note


def test_library_versions_are_checked():
    with pytest.raises(GpuwiseError, match="did you mean 'transformers'"):
        profile_for("hf", ("transfomers==4.44",))
    with pytest.raises(GpuwiseError, match="write name==version"):
        profile_for("hf", ("transformers",))
    assert profile_for("hf", ("bitsandbytes 0.42.0", "torch=1.13")).bnb_4bit_keeps_input


def test_python_gelu_new_keeps_three_more_mlp_wide_tensors():
    arch = get_model("gpt2")  # hidden_act gelu_new: transformers' NewGELUActivation, written in Python
    w = workload_from_mapping({"model": "gpt2", "task": "full-finetune", "precision": "bf16"})
    hf = profile_for("hf")
    native = replace(hf, transformers_modeling=False)  # e.g. nn.GELU(approximate="tanh") in LitGPT
    t, i = 8 * 1024, 3072
    got = layer_activations(arch, w, regime_for(w), hf, 8, 1024).saved_bytes
    assert got - layer_activations(arch, w, regime_for(w), native, 8, 1024).saved_bytes == 3 * 2 * t * i


def test_selective_recompute_drops_the_attention_core():
    a = estimate_memory(W(task="full-finetune", attention="eager")).phase("forward").components["activations"]
    s = (
        estimate_memory(W(task="full-finetune", attention="eager", grad_checkpointing="selective"))
        .phase("forward")
        .components["activations"]
    )
    f = (
        estimate_memory(W(task="full-finetune", attention="eager", grad_checkpointing="full"))
        .phase("forward")
        .components["activations"]
    )
    assert f < s < a


def test_logits_are_upcast_to_fp32_for_the_loss():
    e = estimate_memory(W(task="full-finetune", batch_size=1, seq_len=2048))
    tv = 2048 * 128_256
    assert (
        e.phase("forward").components["logits_loss"] == 10 * tv
    )  # bf16 head output + fp32 copy + fp32 log-softmax
    litgpt = estimate_memory(W(task="full-finetune", batch_size=1, seq_len=2048, framework="litgpt"))
    assert litgpt.phase("forward").components["logits_loss"] == 4 * tv  # chunked, 16-bit


# ---- phases, totals, overheads ---------------------------------------------------------------------


def test_peak_is_the_largest_phase_not_a_sum():
    e = estimate_memory(W(task="lora", batch_size=2))
    assert [p.name for p in e.phases] == ["forward", "backward", "optimizer_step"]
    peaks = {p.name: p.allocated_bytes for p in e.phases}
    assert e.peak_allocated_bytes == max(peaks.values()) < sum(peaks.values())
    assert e.peak_phase == max(peaks, key=peaks.get)
    inf = estimate_memory(W(task="inference"))
    assert [p.name for p in inf.phases] == ["prefill", "decode"]


def test_breakdown_sums_to_device_total_and_orders_allocated_reserved_total():
    for w in (W(task="lora"), W(task="inference"), W(task="qlora", precision="nf4")):
        e = estimate_memory(w)
        assert set(e.breakdown) == set(COMPONENTS)
        assert sum(e.breakdown.values()) == pytest.approx(e.device_total_bytes)
        assert e.peak_allocated_bytes <= e.peak_reserved_bytes < e.device_total_bytes
        assert e.device_total_bytes - e.peak_reserved_bytes == pytest.approx(e.breakdown["cuda_context"])


def test_overhead_functions():
    assert cuda_context_bytes() == 400 * 2**20
    assert cuda_context_bytes(lazy_loading=False) > cuda_context_bytes()
    assert allocator_reserve_bytes(0) == 0
    assert allocator_reserve_bytes(10 * GiB, sharded=True) > allocator_reserve_bytes(10 * GiB) > 0


def test_fits_and_headroom():
    small = estimate_memory(
        workload_from_mapping({"model": "llama-3.2-1b", "task": "inference", "gpu": "h100-sxm"})
    )
    assert small.fits and 90 < small.headroom_pct < 100
    big = estimate_memory(
        workload_from_mapping({"model": "llama-3-70b", "task": "inference", "gpu": "rtx-4090"})
    )
    assert not big.fits and big.headroom_pct < 0
    assert big.gpu_memory_bytes == 24 * GiB  # datasheet "24 GB" is binary: 24,564 MiB in nvidia-smi


def test_other_gpu_changes_only_capacity():
    w = W(task="lora")
    a, b = estimate_memory(w), estimate_memory(w, get_gpu("a100-40gb-sxm"))
    assert a.peak_allocated_bytes == b.peak_allocated_bytes and a.gpu_memory_bytes == 2 * b.gpu_memory_bytes


# ---- sharding and parallelism ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sharding, weights_div, grads_div, state_div",
    [
        ("ddp", 1, 1, 1),
        ("zero1", 1, 1, 4),
        ("zero2", 1, 4, 4),
        ("zero3", 4, 4, 4),
        ("fsdp", 4, 4, 4),
    ],
)
def test_sharding_divides_the_right_terms(sharding, weights_div, grads_div, state_div):
    # amp-bf16: fp32 parameters, gradients and AdamW moments (4 + 4 + 8 bytes per parameter)
    e = estimate_memory(
        W(task="full-finetune", precision="amp-bf16", optimizer="adamw-fused", num_gpus=4, sharding=sharding)
    )
    step = e.phase("optimizer_step").components
    assert step["weights"] == pytest.approx(4 * LLAMA3_8B / weights_div)
    buckets = 4 * LLAMA3_8B if sharding == "ddp" else 0  # DDP gradient buckets
    if sharding in ("zero1", "zero2"):
        buckets = 5e8 * 4  # ZeRO-1/2: one reduce_bucket_size (DeepSpeed default) of the fp32 gradients
    assert step["gradients"] == pytest.approx(4 * LLAMA3_8B / grads_div + buckets)
    assert step["optimizer_states"] == pytest.approx(8 * LLAMA3_8B / state_div)


def test_multi_gpu_without_sharding_is_ddp_and_says_so():
    e = estimate_memory(W(task="full-finetune", num_gpus=2))
    assert any("DDP" in a for a in e.assumptions)


def test_tensor_parallel_splits_weights_activations_and_kv():
    one = estimate_memory(W(task="inference", batch_size=8, seq_len=4096))
    two = estimate_memory(W(task="inference", batch_size=8, seq_len=4096, tp=2, num_gpus=2))
    assert two.phase("decode").components["weights"] == pytest.approx(
        one.phase("decode").components["weights"] / 2
    )
    assert two.phase("decode").components["kv_cache"] == pytest.approx(
        one.phase("decode").components["kv_cache"] / 2
    )
    t1 = estimate_memory(W(task="full-finetune")).phase("forward").components["activations"]
    t2 = estimate_memory(W(task="full-finetune", tp=2, num_gpus=2)).phase("forward").components["activations"]
    assert t2 == pytest.approx(t1 / 2)


def test_pipeline_parallel_splits_layers():
    one = estimate_memory(W(task="inference")).phase("decode").components["weights"]
    four = estimate_memory(W(task="inference", pp=4, num_gpus=4)).phase("decode").components["weights"]
    assert one / 4 < four < one / 2  # a quarter of the blocks plus the embedding (or head) stage


# ---- model families ---------------------------------------------------------------------------------


def test_vit_tokens_come_from_the_image():
    e = estimate_memory(
        workload_from_mapping({"model": "vit-l-16", "task": "cv-train", "image_size": 224, "batch_size": 8})
    )
    e384 = estimate_memory(
        workload_from_mapping({"model": "vit-l-16", "task": "cv-train", "image_size": 384, "batch_size": 8})
    )
    ratio = e384.phase("forward").components["activations"] / e.phase("forward").components["activations"]
    assert ratio == pytest.approx(577 / 197, rel=0.05)  # (384/16)^2 + 1 vs (224/16)^2 + 1 tokens


def test_moe_weights_hold_every_expert():
    e = estimate_memory(workload_from_mapping({"model": "mixtral-8x7b", "task": "inference"}))
    assert e.phase("decode").components["weights"] == pytest.approx(2 * get_model("mixtral-8x7b").num_params)


def test_a_conv_model_without_a_layer_list_is_refused_with_a_clear_line(tmp_path, monkeypatch):
    # resnet-50 and sdxl are modelled (gpuwise.vision, tests/test_vision_*.py); a user's conv row is not.
    from gpuwise.catalog import models as models_module

    models = tmp_path / "models.yaml"
    models.write_text("- id: my-unet\n  mlp_type: diffusion-unet\n  params_b: 0.5\n")
    monkeypatch.setenv("GPUWISE_MODELS", str(models))
    models_module.clear_cache()
    try:
        with pytest.raises(GpuwiseError, match=r"no layer list for.*--traced --model-factory"):
            estimate_memory(workload_from_mapping({"model": "my-unet", "task": "cv-train"}))
    finally:
        monkeypatch.delenv("GPUWISE_MODELS")
        models_module.clear_cache()


def test_memory_package_does_not_import_torch():
    code = (
        "import sys; from gpuwise.memory import estimate_memory, fit_table; from gpuwise.workload import "
        "workload_from_mapping as W; w = W({'model': 'llama-3-8b', 'task': 'qlora'}); estimate_memory(w); "
        "fit_table(w); assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_qwen_v1_materialized_scores_stay_16_bit(monkeypatch):
    # Qwen v1's modeling_qwen.py runs F.scaled_dot_product_attention with an explicit mask: its math path
    # keeps the 16-bit softmax output only (2 bytes a score), where HF's eager decoders keep an fp32 softmax
    # and its 16-bit cast (6 bytes). ms-swift's Qwen-7B pair without checkpointing: 57.67 vs 37.70 GiB.
    from pathlib import Path

    from gpuwise.catalog import models as models_module
    from gpuwise.memory.frameworks import profile_for_workload
    from gpuwise.memory.regime import regime_for

    qwen1 = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "qwen1_models.yaml"
    monkeypatch.setenv("GPUWISE_MODELS", str(qwen1))
    models_module.clear_cache()

    def scores_bytes(model: str) -> float:
        saved = {}
        for attention in ("eager", "flash"):
            w = workload_from_mapping(
                {"model": model, "task": "lora", "seq_len": 2048, "attention": attention}
            )
            arch = get_model(model)
            saved[attention] = layer_activations(arch, w, regime_for(w), profile_for_workload(w), 1, 2048)
        return saved["eager"].saved_bytes - saved["flash"].saved_bytes

    try:
        heads_scores = 32 * 2048 * 2048
        assert scores_bytes("qwen-7b") == pytest.approx(2.0 * heads_scores, rel=0.01)
        assert scores_bytes("llama-2-7b") == pytest.approx(6.0 * heads_scores, rel=0.01)
    finally:
        monkeypatch.delenv("GPUWISE_MODELS")
        models_module.clear_cache()
