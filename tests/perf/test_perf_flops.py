"""FLOP counts, roofline and collectives against hand-computed values."""

import math

import pytest

from gpuwise.catalog import get_gpu, get_model
from gpuwise.perf import (
    allgather_s,
    allreduce_s,
    attention_flops_per_token,
    link_for,
    lora_params,
    matmul_params,
    palm_flops_per_token,
    pipeline_bubble_fraction,
    step_time_from_flops,
    training_flops,
)

LLAMA3_8B_MATMUL = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 128256 * 4096


def test_matmul_params_are_blocks_plus_lm_head():
    arch = get_model("llama-3-8b")
    assert matmul_params(arch) == LLAMA3_8B_MATMUL == 7_504_658_432
    # Non-embedding params minus the 65 RMSNorm weight vectors.
    assert matmul_params(arch) == arch.num_params - 128256 * 4096 - 65 * 4096


def test_tied_lm_head_still_costs_a_matmul():
    arch = get_model("gpt2")  # tied embeddings
    counts = arch.param_counts()
    assert counts.lm_head == 0
    assert (
        matmul_params(arch)
        == counts.num_layers * (counts.per_layer_attention + counts.per_layer_mlp) + 50257 * 768
    )


def test_full_training_is_six_n_t_plus_causal_attention():
    arch = get_model("llama-3-8b")
    tokens, seq = 4 * 2048, 2048
    f = training_flops(arch, tokens, seq)
    assert f.linear_model == 6 * LLAMA3_8B_MATMUL * tokens
    # Causal: average context s/2; 2 matmuls (QK^T, PV) x 2 FLOPs x context x q_dim per layer;
    # x3 for backward.
    assert f.attention_model == 3 * (4 * (seq / 2) * 4096 * 32) * tokens
    assert f.executed == f.model


def test_palm_convention_matches_a_torch_flop_count():
    # torch.utils.flop_counter.FlopCounterMode counted 9.991e13 FLOPs for one Llama-3-8B
    # training step at batch 1 x 2048 (attention counted non-causal, like PaLM's 12·L·d·s term).
    arch = get_model("llama-3-8b")
    assert palm_flops_per_token(arch, 2048) * 2048 == pytest.approx(9.991e13, rel=0.02)


def test_lora_skips_weight_gradients_and_pays_for_adapters():
    arch = get_model("llama-3-8b")
    adapters = lora_params(arch, 16, ("all-linear",))
    assert adapters == 41_943_040  # peft's count for r=16 on all linear layers of Llama-3-8B
    tokens = 2048
    f = training_flops(arch, tokens, 2048, lora_rank=16, lora_target_names=("all-linear",))
    assert f.linear_model == 4 * LLAMA3_8B_MATMUL * tokens + 6 * adapters * tokens


def test_lora_targets_by_name():
    arch = get_model("llama-3-8b")
    qv = lora_params(arch, 8, ("q_proj", "v_proj"))
    assert qv == 32 * 8 * ((4096 + 4096) + (4096 + 1024))


@pytest.mark.parametrize(
    "mode, extra_linear, extra_attention", [("full", 1, 1), ("selective", 0, 1), ("none", 0, 0)]
)
def test_recompute_adds_a_forward(mode, extra_linear, extra_attention):
    arch = get_model("llama-3-8b")
    tokens, seq = 2048, 2048
    f = training_flops(arch, tokens, seq, checkpointing=mode)
    assert f.linear_recompute == extra_linear * 2 * LLAMA3_8B_MATMUL * tokens
    assert f.attention_recompute == extra_attention * attention_flops_per_token(arch, seq) * tokens


def test_moe_counts_only_routed_experts():
    arch = get_model("mixtral-8x7b")
    per_expert = 3 * 4096 * 14336
    assert matmul_params(arch, active=False) - matmul_params(arch, active=True) == 32 * 6 * per_expert


def test_decode_attention_is_not_halved():
    arch = get_model("llama-3-8b")
    assert attention_flops_per_token(arch, 1000, causal=False) == 2 * attention_flops_per_token(
        arch, 1000, causal=True
    )


def test_memory_bound_roofline_is_bytes_over_bandwidth():
    h100 = get_gpu("h100-sxm")
    t = step_time_from_flops(1e9, 16e9, h100, "bf16", bandwidth_fraction=1.0)
    assert t.bound == "memory_bandwidth"
    assert t.time_s == pytest.approx(16e9 / 3.35e12)


def test_compute_bound_roofline_uses_efficiency_and_the_dtype_peak():
    h100 = get_gpu("h100-sxm")
    t = step_time_from_flops(1e15, 1e6, h100, "fp8", efficiency=0.5)
    assert t.bound == "compute" and t.dtype == "fp8"
    assert t.time_s == pytest.approx(1e15 / (1979e12 * 0.5))
    # Workload precisions map to their matmul dtype; the default efficiency is MAMF x stack.
    amp = step_time_from_flops(1e15, 0, h100, "amp-bf16")
    assert amp.dtype == "bf16" and amp.efficiency == pytest.approx(0.803 * 0.75)  # MAMF x training stack
    serving = step_time_from_flops(1e15, 0, h100, "bf16", kind="inference")
    assert serving.efficiency == pytest.approx(0.803 * 0.65)


def test_roofline_host_floor_and_bad_input():
    a100 = get_gpu("a100-80gb-sxm")
    t = step_time_from_flops(1e6, 1e3, a100, "bf16", overhead_s=0.01)
    assert t.bound == "host" and t.time_s > 0.01
    with pytest.raises(ValueError):
        step_time_from_flops(-1, 0, a100)
    # V100 has no bf16 tensor cores: the fp32 rate is used.
    assert step_time_from_flops(1e12, 0, get_gpu("v100-sxm2-32gb"), "bf16").dtype == "fp32"


def test_ring_allreduce_hand_case():
    link = link_for(get_gpu("h100-sxm"), 8)
    assert link.kind == "nvlink"
    assert link.bytes_per_s == pytest.approx(450e9 * 0.80)  # 900 GB/s bidirectional -> 450 per direction
    assert allreduce_s(1e9, 8, link) == pytest.approx(2 * 7 / 8 * 1e9 / 360e9 + 10e-6)
    assert allgather_s(1e9, 8, link) == pytest.approx(7 / 8 * 1e9 / 360e9 + 10e-6)
    assert allreduce_s(1e9, 1, link) == 0.0


def test_links_pcie_consumer_and_network():
    assert link_for(get_gpu("l40s"), 4).kind == "pcie"
    consumer = link_for(get_gpu("rtx-4090"), 2)
    assert consumer.kind == "pcie" and consumer.bytes_per_s == pytest.approx(32e9 * 0.75 * 0.5)
    assert link_for(get_gpu("a100-80gb-pcie"), 2).kind == "nvlink"  # bridged pair
    assert link_for(get_gpu("a100-80gb-pcie"), 4).kind == "pcie"
    net = link_for(get_gpu("h100-sxm"), 64)
    assert net.kind == "network" and net.bytes_per_s == pytest.approx(50e9 * 0.85)


def test_pipeline_bubble():
    assert pipeline_bubble_fraction(4, 12) == pytest.approx(3 / 15)
    assert pipeline_bubble_fraction(1, 8) == 0.0
    assert math.isclose(pipeline_bubble_fraction(8, 1), 7 / 8)


def test_elementwise_traffic_hand_count():
    from gpuwise.perf.flops import elementwise_bytes_per_token

    gpt2 = get_model("gpt2")  # d 768, GELU MLP 3072, learned positions (no rotary), 12 layers
    # 2 norms, 2 residual adds, GELU in -> out, attention output back to [tokens, heads x dim]
    forward = 4 * 768 + 6 * 768 + 2 * 3072 + 2 * 768
    per_layer = forward * 3 * 2  # forward + 2x backward, bf16
    assert elementwise_bytes_per_token(gpt2, 2) == 12 * per_layer + 50257 * 20  # + fp32 cross-entropy
    recompute = elementwise_bytes_per_token(gpt2, 2, recompute=True)
    assert recompute - elementwise_bytes_per_token(gpt2, 2) == 12 * forward * 2


def test_autocast_keeps_the_residual_stream_in_fp32_and_casts_norm_outputs():
    from gpuwise.perf.flops import elementwise_bytes_per_token

    vit = get_model("vit-b-16")  # d 768, GELU 3072, 12 layers, no loss over a vocabulary
    d, i = 768, 3072
    # norms read + write the fp32 stream; residual adds read fp32 + bf16 and write fp32; each norm
    # output is cast to bf16 (read 4, write 2); GELU and the head merge stay bf16.
    forward = 2 * d * 8 + 2 * d * 10 + 2 * d * 6 + 2 * i * 2 + 2 * d * 2
    amp = elementwise_bytes_per_token(vit, 2, stream_bytes=4, autocast=True)
    assert amp == 12 * forward * 3
    pure = elementwise_bytes_per_token(vit, 2)
    fp32 = elementwise_bytes_per_token(vit, 4)
    assert pure < amp < fp32 * 1.1  # AMP moves nearly fp32's bytes in its elementwise work
    assert pure == pytest.approx(fp32 / 2)


def test_attention_traffic_fused_vs_eager():
    from gpuwise.perf.flops import attention_bytes_per_token

    vit = get_model("vit-b-16")
    fused = attention_bytes_per_token(vit, 197, 2, "sdpa")
    assert fused == 12 * 2 * (768 + 768) * 2  # read q, k, v and write o, bf16
    eager = attention_bytes_per_token(vit, 197, 2, "eager")
    assert eager - fused == 12 * 12 * 197 * (8 * 2 + 8)  # heads x context scores, 24 B each in bf16
    fp32_scores = attention_bytes_per_token(vit, 197, 4, "eager") - attention_bytes_per_token(vit, 197, 4)
    assert fp32_scores == 12 * 12 * 197 * 32  # no casts around an fp32 softmax: 8 x 4 bytes


def test_attention_kernels_by_generation():
    from gpuwise.perf.efficiency import attention_efficiency

    assert attention_efficiency(get_gpu("a100-80gb-sxm"), "training") == 0.50  # FlashAttention-2 on A100
    assert attention_efficiency(get_gpu("h100-sxm"), "training") == 0.30  # FA2 reaches ~35 % on H100
    assert attention_efficiency(get_gpu("h100-sxm"), "inference") == 0.60  # FA3-class forward
    assert attention_efficiency(get_gpu("h100-sxm"), "training", "eager") == pytest.approx(0.30 * 0.25)


def test_efficiency_table_loads_typed_and_names_a_bad_key():
    from gpuwise.perf import efficiency

    table = efficiency.constants()
    assert table.host.kernels_per_layer_training == 90 and isinstance(table.host.eager_frameworks, tuple)
    assert table.mamf.gpu["a100-80gb-sxm"].fp8 is None  # no fp8 figure: mamf() falls back to bf16
    assert efficiency.mamf(get_gpu("a100-80gb-sxm")).fp8 == 0.869
    with pytest.raises(ValueError, match=r"\[bandwidth\]: unknown key 'stream_fractoin'"):
        efficiency._load(efficiency.Bandwidth, {"decode_fraction": 0.75, "stream_fractoin": 0.9}, "bandwidth")
    with pytest.raises(ValueError, match=r"\[serving\]: missing key 'context_bytes'"):
        efficiency._load(
            efficiency.Serving, {"memory_utilization": 0.9, "prefill_chunk_tokens": 1}, "serving"
        )


def test_a_sharded_group_spread_over_nodes_uses_one_nic_per_member_in_each_node():
    from gpuwise.perf import comm
    from gpuwise.perf.hardware import links

    gpu = get_gpu("a100-80gb-sxm")
    network = links(gpu).network.bytes_per_s
    # FSDP over 64 GPUs in 8 nodes: 8 members per node, 8 rails (DGX A100: one 200 Gb/s NIC per GPU)
    fsdp = comm.link_for(gpu, 64, crosses_nodes=True, ranks_per_node=8)
    assert fsdp.kind == "network" and fsdp.bytes_per_s == pytest.approx(8 * network)
    # data parallel across TP8 nodes: one member per node, one NIC
    assert comm.link_for(gpu, 16, crosses_nodes=True, ranks_per_node=1).bytes_per_s == network
    # never faster than the node's own fabric between those GPUs
    pcie_gpu = get_gpu("rtx-4090")
    capped = comm.link_for(pcie_gpu, 32, crosses_nodes=True, ranks_per_node=8)
    assert capped.bytes_per_s <= links(pcie_gpu).pcie.bytes_per_s


def test_torchtitan_selective_checkpointing_recomputes_half_the_forward_matmuls():
    arch = get_model("llama-2-13b")
    none = training_flops(arch, 8192, 4096, checkpointing="none")
    megatron = training_flops(arch, 8192, 4096, checkpointing="selective")
    titan = training_flops(arch, 8192, 4096, checkpointing="selective", selective_linear_fraction=0.5)
    full = training_flops(arch, 8192, 4096, checkpointing="full")
    assert megatron.linear_recompute == 0 and titan.linear_recompute == pytest.approx(
        full.linear_recompute / 2
    )
    assert none.linear_recompute == 0 < titan.linear_recompute < full.linear_recompute
