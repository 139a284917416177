"""predict(): training and inference behaviour on hand cases and limiting regimes."""

import json

import pytest

from gpuwise.catalog import get_gpu, get_model
from gpuwise.perf import predict
from gpuwise.perf.footprint import kv_bytes_per_token_per_gpu, weight_bytes
from gpuwise.perf.numerics import resolve
from gpuwise.workload import workload_from_mapping


def W(**kw):
    return workload_from_mapping(kw)


def test_single_gpu_decode_is_weight_bytes_over_bandwidth():
    # Batch 1, 1-token prompt: one step streams the bf16 weights once (plus a tiny KV read).
    p = predict(W(model="llama-3-8b", gpu="h100-sxm", seq_len=1, output_len=2, precision="bf16"))
    weights = 7_504_658_432 * 2  # block linears + lm_head in bf16 (the embedding lookup is not read)
    expected = weights / (3.35e12 * 0.75) + 0.5e-3  # decode bandwidth fraction + engine step overhead
    assert p.inference.decode_weight_bytes == pytest.approx(weights)
    assert p.inference.tpot_s == pytest.approx(expected, rel=0.01)
    assert p.bound == "memory_bandwidth"


def test_batching_shares_the_weight_read_until_compute_bound():
    base = dict(model="llama-3-8b", gpu="a100-80gb-sxm", seq_len=128, output_len=128)
    one = predict(W(**base, batch_size=1)).inference
    eight = predict(W(**base, batch_size=8)).inference
    assert eight.tpot_s < 1.1 * one.tpot_s  # the same weights serve 8 sequences
    knee = one.decode_compute_bound_batch
    big = predict(W(**base, batch_size=int(4 * knee))).inference
    assert big.decode_bound == "compute"
    assert big.tpot_s > 2 * one.tpot_s


def test_quantized_weights_cut_decode_time():
    base = dict(model="llama-3-8b", gpu="a10", seq_len=16, output_len=16)
    bf16 = predict(W(**base, precision="bf16")).inference.tpot_s
    int4 = predict(W(**base, precision="int4")).inference.tpot_s
    assert int4 < bf16 / 2.5


def test_kv_cache_concurrency_hand_case():
    w = W(
        model="llama-3-8b",
        gpu="h100-sxm",
        task="serving",
        seq_len=1000,
        output_len=1000,
        concurrency=10_000,
        precision="fp8",
        kv_cache_dtype="fp8",
    )
    p = predict(w).inference
    assert p.kv_bytes_per_token_per_gpu == 2 * 32 * 8 * 128 * 1  # K and V, 32 layers, 8 KV heads, fp8
    assert p.max_concurrency == int(p.kv_budget_bytes_per_gpu // (p.kv_bytes_per_token_per_gpu * 2000))
    assert p.batch == p.max_concurrency < 10_000
    assert p.batching == "continuous"
    # Tensor parallel splits KV heads across ranks.
    num = resolve(w, get_gpu("h100-sxm"))
    assert kv_bytes_per_token_per_gpu(get_model("llama-3-8b"), num, 2, 1) == p.kv_bytes_per_token_per_gpu / 2


def test_model_that_does_not_fit_says_so():
    p = predict(W(model="llama-3-70b", gpu="rtx-4090", precision="bf16"))
    assert not p.fits
    assert any("does not fit" in n for n in p.notes)


def test_training_that_does_not_fit_says_so():
    p = predict(W(model="llama-3-8b", task="full-finetune", gpu="a10"))
    assert not p.fits and any("does not fit" in n and "GiB" in n for n in p.notes)
    assert predict(W(model="llama-3.2-1b", task="lora", gpu="a100-80gb-sxm")).fits


def test_long_prompt_serving_is_bound_by_prefill_compute():
    p = predict(
        W(model="llama-3-8b", task="rag", gpu="h100-sxm", seq_len=32768, output_len=128, concurrency=8)
    )
    assert p.inference.decode_bound == "memory_bandwidth"  # a decode-only step streams weights + KV
    assert p.bound == p.inference.throughput_bound == "compute"  # but prompts dominate the work


def test_ttft_is_compute_bound_prefill():
    p = predict(W(model="llama-3-8b", gpu="a100-80gb-sxm", seq_len=4096, output_len=1))
    assert p.inference.ttft_s > 2 * 7.5e9 * 4096 / 312e12  # at most peak speed
    assert p.inference.prefill_tokens_per_s > 1000


def test_training_step_matches_flops_over_efficiency():
    p = predict(W(model="llama-3-8b", task="pretrain", gpu="a100-80gb-sxm", batch_size=2, seq_len=2048))
    t = p.training
    assert t.step_time_s == pytest.approx(t.compute_s + t.elementwise_s + t.optimizer_s, rel=1e-6)
    assert t.linear_efficiency == pytest.approx(0.869 * 0.75)  # MAMF x training stack factor
    # Attention at the FlashAttention-2 rate on A100 (0.50 of peak, efficiency.toml [attention]).
    tokens, seq = 2 * 2048, 2048
    attn_flops = 3 * (4 * (seq / 2) * 4096 * 32) * tokens
    assert t.attention_s == pytest.approx(attn_flops / (312e12 * 0.50))
    assert t.elementwise_s > 0 and t.elementwise_s < 0.1 * t.compute_s
    assert 45 < p.mfu_pct < 65  # A100 bf16, no recompute
    assert p.bound == "compute"


def test_recompute_and_lora_change_speed_in_the_right_direction():
    base = dict(model="llama-3-8b", gpu="h100-sxm", batch_size=2, seq_len=4096)
    full = predict(W(**base, task="full-finetune")).tokens_per_s
    recompute = predict(W(**base, task="full-finetune", grad_checkpointing="full")).tokens_per_s
    lora = predict(W(**base, task="lora")).tokens_per_s
    assert recompute == pytest.approx(full * 3 / 4, rel=0.05)  # +1 forward of 3 passes
    assert lora > full  # no weight gradients for the frozen base, minus peft's unfused adapter kernels
    fused = predict(W(**base, task="lora", framework="unsloth"))
    assert fused.training.adapter_s == 0 and fused.tokens_per_s > lora


def test_fp8_training_is_faster_but_not_twice():
    base = dict(model="llama-3-8b", task="pretrain", gpu="h100-sxm", batch_size=2, seq_len=4096)
    speedup = (
        predict(W(**base, precision="fp8")).tokens_per_s / predict(W(**base, precision="bf16")).tokens_per_s
    )
    assert 1.2 < speedup < 1.6


def test_data_parallel_over_consumer_pcie_is_communication_bound():
    p = predict(
        W(
            model="llama-3.2-1b",
            task="full-finetune",
            gpu="rtx-4090",
            num_gpus=4,
            sharding="ddp",
            batch_size=1,
            seq_len=512,
            precision="bf16",
        )
    )
    assert p.bound == "communication"
    assert p.training.links["dp"] == "pcie"
    assert p.training.dp_exposed_s > p.training.compute_s


def test_fsdp_and_tensor_parallel_traffic():
    fsdp = predict(
        W(
            model="llama-3-8b",
            task="pretrain",
            gpu="h100-sxm",
            num_gpus=8,
            sharding="fsdp",
            batch_size=2,
            seq_len=4096,
        )
    ).training
    assert fsdp.dp_comm_s > 0 and fsdp.dp_exposed_s < fsdp.dp_comm_s  # mostly hidden under compute
    tp = predict(
        W(model="llama-3-70b", task="pretrain", gpu="h100-sxm", num_gpus=8, tp=8, batch_size=1, seq_len=4096)
    ).training
    assert tp.tp_comm_s > 0 and tp.data_parallel == 1


def test_pipeline_bubble_in_step_time():
    base = dict(
        model="llama-3-70b", task="pretrain", gpu="h100-sxm", num_gpus=4, pp=4, batch_size=1, seq_len=2048
    )
    few = predict(W(**base, grad_accum=1)).training
    many = predict(W(**base, grad_accum=16)).training
    assert few.bubble_fraction == pytest.approx(3 / 4)
    assert many.bubble_fraction == pytest.approx(3 / 19)
    assert few.step_time_s == pytest.approx(
        few.bubble_s / 0.75 + few.optimizer_s + few.dp_exposed_s, rel=1e-6
    )


def test_tiny_model_hits_the_host_floor():
    p = predict(W(model="gpt2", task="pretrain", gpu="h100-sxm", batch_size=1, seq_len=32))
    assert p.bound == "host"
    assert any("launch overhead" in a for a in p.assumptions)


def test_eager_framework_pays_launch_overhead_per_decode_step():
    base = dict(model="llama-3.2-1b", gpu="h100-sxm", seq_len=64, output_len=64)
    engine = predict(W(**base)).inference.tpot_s
    eager = predict(W(**base, framework="hf")).inference.tpot_s
    assert eager > 2 * engine


def test_gpu_quirks_are_noted():
    a100_fp8 = predict(W(model="llama-3-8b", gpu="a100-80gb-sxm", precision="fp8"))
    assert a100_fp8.compute_dtype == "bf16"
    assert any("no fp8 tensor cores" in n for n in a100_fp8.notes)
    geforce = predict(W(model="llama-3-8b", gpu="rtx-4090", precision="bf16"))
    assert any("FP32-accumulate" in n for n in geforce.notes)
    mi = predict(W(model="llama-3-8b", gpu="l4"))
    assert any("no published MAMF" in a for a in mi.assumptions)


def test_what_if_on_another_gpu_and_json():
    w = W(model="llama-3-8b", task="lora", gpu="a100-80gb-sxm")
    h100 = predict(w, get_gpu("h100-sxm"))
    assert h100.gpu == "h100-sxm"
    assert h100.tokens_per_s > predict(w).tokens_per_s
    doc = json.loads(json.dumps(h100.to_dict()))
    assert doc["training"]["step_time_s"] == pytest.approx(h100.step_time_s)


def test_vision_models():
    vit = predict(W(model="vit-b-16", task="cv-train", gpu="a100-80gb-sxm", batch_size=64, image_size=224))
    assert vit.training.micro_batch_tokens == 64 * 197
    resnet = predict(W(model="resnet-50", task="cv-inference", gpu="l4", precision="int8", batch_size=64))
    assert resnet.compute_dtype == "int8"
    # 2 × 4.089 GMACs per image, counted from ResNet-50's layers (gpuwise.vision)
    assert resnet.samples_per_s == pytest.approx(
        242.5e12 * 0.44 / (8.178e9 + 0.5e-3 * 242.5e12 * 0.44 / 64), rel=1e-3
    )
    sdxl = predict(W(model="sdxl", task="cv-inference", gpu="l40s", image_size=1024))
    assert sdxl.throughput_unit == "images/s" and 0 < sdxl.samples_per_s < 1  # 50 steps × 2 CFG passes
    assert any("50 denoising steps" in a for a in sdxl.assumptions)


def test_weight_bytes_of_quantized_model():
    arch = get_model("llama-3-8b")
    w = W(model="llama-3-8b", task="qlora", precision="nf4")
    num = resolve(w, get_gpu("a100-80gb-sxm"))
    blocks = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    expected = blocks * (0.5 + 4 / 64) + (arch.num_params - blocks) * 2
    assert weight_bytes(arch, num) == pytest.approx(expected)


def test_fp32_matmuls_run_on_the_cuda_cores_near_their_peak():
    from gpuwise.perf.efficiency import fp32_matmul_fraction

    assert fp32_matmul_fraction(get_gpu("a100-80gb-sxm")) == 0.85  # SIMT SGEMM on a datacenter die
    assert (
        fp32_matmul_fraction(get_gpu("rtx-4090")) == 0.60
    )  # dual-issue fp32 counted in a graphics die's peak
    assert fp32_matmul_fraction(get_gpu("l4")) == 0.60
    fp32 = predict(W(model="vit-l-16", task="cv-train", gpu="a100-40gb-sxm", batch_size=64, precision="fp32"))
    # no stack factor on SIMT GEMMs: only the 16-bit framework overhead (1/16 of the time) is added
    assert 0.80 < fp32.training.linear_efficiency < 0.85
    # MFU is quoted against the BF16 peak (PaLM convention); the fp32 peak's share is kept beside it
    assert fp32.compute_dtype == "fp32" and fp32.mfu_reference_dtype == "bf16"
    assert fp32.mfu_compute_dtype_pct is not None and 70 < fp32.mfu_compute_dtype_pct < 85
    assert fp32.mfu_pct == pytest.approx(fp32.mfu_compute_dtype_pct * 19.5 / 312, rel=1e-6)


def test_amp_gain_on_a_vit_is_far_below_the_tensor_core_peak_ratio():
    base = dict(
        model="vit-b-16", task="cv-train", gpu="a100-40gb-sxm", num_gpus=4, sharding="ddp", batch_size=128
    )
    fp32 = predict(W(**base, precision="fp32"))
    amp = predict(W(**base, precision="amp-bf16"))
    pure = predict(W(**base, precision="bf16"))
    gain = amp.samples_per_s / fp32.samples_per_s
    assert (
        4 < gain < 0.6 * 312 / 19.5
    )  # memory-bound work only halves its bytes; fp32 GEMMs run nearer their peak
    # torch.autocast keeps the residual stream and LayerNorm in fp32 and casts weights on use: AMP is
    # slower than pure bf16 (rasbt/pytorch-memory-optim: 3.45 vs 2.88 min for ViT-L/16, 1.20x)
    t, p = amp.training, pure.training
    assert t.elementwise_s > 1.5 * p.elementwise_s
    assert t.weight_traffic_s > p.weight_traffic_s
    assert 1.1 < t.step_time_s / p.step_time_s < 1.35
    assert any("torch.autocast" in a for a in amp.assumptions)
    # 197 tokens: the attention kernel moves more bytes than it has FLOPs to hide them
    assert t.attention_bound == "memory_bandwidth"


def test_frameworks_that_keep_16_bit_activations_pay_no_autocast_casts():
    base = dict(
        model="llama-3-8b",
        task="pretrain",
        gpu="h100-sxm",
        batch_size=2,
        seq_len=4096,
        precision="amp-bf16",
        grad_accum=4,
    )
    plain = predict(W(**base)).training
    megatron = predict(W(**base, framework="megatron-lm")).training
    assert megatron.weight_traffic_s == 0  # no casts; gradient accumulation fused into the wgrad GEMM
    assert plain.weight_traffic_s > 0 and plain.elementwise_s > megatron.elementwise_s
    assert megatron.optimizer.implementation == "fused" and plain.optimizer.implementation == "foreach"


def test_eager_attention_moves_the_score_matrices():
    base = dict(model="llama-3-8b", task="pretrain", gpu="a100-80gb-sxm", batch_size=1, seq_len=4096)
    flash = predict(W(**base, attention="sdpa")).training
    eager = predict(W(**base, attention="eager")).training
    # 32 heads x 4096 scores per token and layer, 24 bytes each forward, twice that backward
    scores = 4096 * 32 * 4096 * 24 * 3 * 32
    assert eager.attention_s - flash.attention_s > scores / (2.039e12 * 0.9)
    assert eager.attention_bound == "memory_bandwidth" and flash.attention_bound == "compute"


def test_zero_gathers_updated_parameters_after_the_step():
    base = dict(
        model="llama-3.2-1b",
        task="full-finetune",
        gpu="a100-80gb-pcie",
        num_gpus=4,
        batch_size=4,
        seq_len=2048,
        precision="bf16",
    )
    ddp = predict(W(**base, sharding="ddp")).training
    zero2 = predict(W(**base, sharding="zero2")).training
    assert zero2.optimizer_s < ddp.optimizer_s / 3  # a quarter of the state each
    assert (
        zero2.dp_exposed_s > ddp.dp_exposed_s
    )  # the parameter all-gather follows the update: nothing hides it


def test_vit_inference_in_eager_pytorch_pays_its_elementwise_kernels():
    base = dict(model="vit-b-16", task="cv-inference", gpu="a100-40gb-sxm", batch_size=128, precision="fp16")
    engine = predict(W(**base)).samples_per_s
    eager = predict(W(**base, framework="pytorch", attention="eager")).samples_per_s
    # AITemplate README (examples/04_vit, A100-40GB): 5,100 img/s compiled vs 2,138 in PyTorch 1.12 eager
    assert 4000 < engine < 6000 and 1800 < eager < 3000
