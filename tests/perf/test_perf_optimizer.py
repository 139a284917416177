"""Optimizer step time: bytes per implementation, launches, and what predict() does with them."""

import pytest

from gpuwise.catalog import get_gpu, get_model
from gpuwise.perf import predict
from gpuwise.perf.optimizer_step import default_implementation, optimizer_step, trainable_tensors
from gpuwise.workload import workload_from_mapping

A100 = get_gpu("a100-80gb-sxm")
STREAM_BW = 2.039e12 * 0.90  # datasheet bandwidth x streaming fraction (efficiency.toml [bandwidth])


def W(**kw):
    return workload_from_mapping(kw)


NAMES = {"adamw", "adamw-fused", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd"}


def step(impl_or_name, params=1e9, tensors=300, p=4.0, g=4.0, **kw):
    """An optimizer name, or an implementation of AdamW ('for-loop')."""
    name = impl_or_name if impl_or_name in NAMES else "adamw"
    impl = None if name == impl_or_name else impl_or_name
    return optimizer_step(name, params, tensors, A100, param_bytes=p, grad_bytes=g, implementation=impl, **kw)


def test_bytes_per_parameter_hand_counted_from_each_implementation():
    # fused AdamW: read p, g, m, v and write p, m, v once -> 7 x 4 bytes in fp32
    assert step("adamw-fused").bytes_per_param == 28
    # foreach AdamW: mul_(p), lerp_(m, g), mul_(v), addcmul_(v, g, g), sqrt, div_, add_, addcdiv_(p, m, t)
    assert step("adamw").bytes_per_param == 4 * 4 + 2 * 4 + 14 * 4 == 80
    assert step("for-loop").bytes_per_param == 80  # the same passes, launched per tensor
    # pure bf16 training keeps torch's AdamW state in bf16: every term halves
    assert step("adamw", p=2, g=2).bytes_per_param == 40
    # bitsandbytes 8-bit: p and g in their dtypes, both states 1 byte, plus block absmax
    assert step("adamw-8bit").bytes_per_param == pytest.approx(8 + 4 + 4 + 16 / 256)
    # SGD with momentum (foreach): mul_(buf), add_(buf, g), add_(p, buf)
    assert step("sgd").bytes_per_param == 2 * 4 + 4 + 5 * 4
    assert step("adafactor").bytes_per_param == 84


def test_memory_bound_time_is_bytes_over_streaming_bandwidth():
    fused = step("adamw-fused")
    assert fused.bound == "memory_bandwidth"
    assert fused.time_s == pytest.approx(28 * 1e9 / STREAM_BW)
    foreach = step("adamw")
    # 80 vs 28 bytes per parameter: deepmd-kit PR #4463 measured fused Adam 2.75x faster (22 -> 8 ms)
    assert foreach.time_s / fused.time_s == pytest.approx(80 / 28)


def test_fp16_grad_scaler_adds_an_unscale_pass_except_in_the_fused_kernel():
    assert step("adamw", fp16_scaler=True).bytes_per_param == 80 + 8
    assert step("adamw-fused", fp16_scaler=True).bytes_per_param == 28


def test_multi_tensor_launches_follow_aten_limits():
    # 300 small tensors (1,000 elements): the tensor-list limits set the launch count per op
    small = step("adamw-fused", params=300_000, tensors=300)
    assert small.launches == 9  # 4 lists (p, g, m, v): at most 36 tensors per launch
    # one huge tensor: 320 chunks of 65,536 elements per launch
    big = step("adamw-fused", params=65_536 * 320 * 10, tensors=1)
    assert big.launches == 11  # 10 full launches, and the chunk count rounds the partial one up


def test_for_loop_over_many_small_tensors_waits_on_the_host():
    loop = step("for-loop", params=5e6, tensors=2000)
    assert loop.bound == "host"
    assert loop.launches == 8 * 2000
    assert loop.time_s == pytest.approx(8 * 2000 * 10e-6)  # one eager dispatch (~10 us) per op and tensor
    foreach = step("adamw", params=5e6, tensors=2000)
    assert foreach.time_s < loop.time_s / 10


def test_adafactor_syncs_once_per_tensor_so_host_and_device_add():
    ada = step("adafactor", params=1e8, tensors=200)
    assert ada.time_s == pytest.approx(ada.device_s + ada.host_s)


def test_trainable_tensor_counts():
    # Llama 3 8B: 32 layers x (q, k, v, o, gate, up, down, 2 RMSNorm weights) + embedding, final norm, head
    assert trainable_tensors(get_model("llama-3-8b")) == 32 * 9 + 3
    # ViT-B/16 and BERT carry biases and LayerNorm biases: 8 attention + 4 MLP + 4 norm tensors per layer
    assert trainable_tensors(get_model("vit-b-16")) // 12 == 16
    # LoRA on all linear layers: an A and a B per projection
    assert trainable_tensors(get_model("llama-3-8b"), 16, ("all-linear",)) == 32 * 7 * 2


def test_framework_defaults():
    assert default_implementation("adamw") == "foreach"  # torch.optim.AdamW on CUDA
    assert default_implementation("adamw", "torchtitan") == "fused"
    assert default_implementation("adamw", "Megatron-LM") == "fused"
    assert default_implementation("adamw-8bit", "torchtitan") == "bitsandbytes-8bit"
    assert default_implementation("sgd") == "foreach"


def test_predict_puts_a_number_on_the_fused_kernel():
    base = dict(
        model="llama-3.2-1b",
        task="full-finetune",
        gpu="h100-sxm",
        seq_len=1024,
        batch_size=1,
        precision="amp-bf16",
    )
    foreach = predict(W(**base, optimizer="adamw")).training
    fused = predict(W(**base, optimizer="adamw-fused")).training
    assert foreach.optimizer.implementation == "foreach" and fused.optimizer.implementation == "fused"
    assert foreach.optimizer_s / fused.optimizer_s == pytest.approx(80 / 28, rel=0.01)
    # a small batch leaves the 1.2B-parameter update a large share of the step
    assert fused.step_time_s < 0.8 * foreach.step_time_s
    assert foreach.step_time_s - fused.step_time_s == pytest.approx(foreach.optimizer_s - fused.optimizer_s)
    eight_bit = predict(W(**base, optimizer="adamw-8bit")).training
    assert eight_bit.optimizer.bytes_per_param < fused.optimizer.bytes_per_param
    doc = predict(W(**base, optimizer="adamw")).to_dict()
    assert doc["training"]["optimizer"]["implementation"] == "foreach"


def test_sharded_optimizer_state_updates_a_shard():
    base = dict(
        model="llama-3-8b",
        task="pretrain",
        gpu="h100-sxm",
        num_gpus=8,
        batch_size=1,
        seq_len=4096,
        precision="bf16",
    )
    ddp = predict(W(**base, sharding="ddp")).training.optimizer
    fsdp = predict(W(**base, sharding="fsdp")).training.optimizer
    assert fsdp.params == pytest.approx(ddp.params / 8)
    assert fsdp.time_s == pytest.approx(ddp.time_s / 8, rel=0.01)
