"""Speed side of the memory gaps: FP4 on FP4 tensor cores (or a refusal), and what offload costs."""

from __future__ import annotations

import pytest

from gpuwise.catalog import get_gpu
from gpuwise.errors import GpuwiseError
from gpuwise.perf import predict
from gpuwise.perf.numerics import QUANT_BYTES, resolve
from gpuwise.workload import workload_from_mapping


def test_fp4_runs_its_matmuls_at_the_fp4_peak_on_blackwell():
    w = workload_from_mapping({"model": "llama-3-8b", "precision": "fp4", "gpu": "b200"})
    num = resolve(w, get_gpu("b200"))
    assert num.compute_dtype == "fp4" and not num.weight_only_quant
    assert num.block_weight_bytes == QUANT_BYTES["fp4"] == 0.5 + 1 / 16  # NVFP4: FP8 scale per 16 values
    int4 = resolve(w.with_changes(precision="int4"), get_gpu("b200"))
    assert int4.weight_only_quant and int4.compute_dtype == "bf16"  # weight-only 4-bit: 16-bit matmuls
    fp4 = predict(w.with_changes(seq_len=4096, output_len=1))
    bf16 = predict(w.with_changes(precision="bf16", seq_len=4096, output_len=1))
    assert fp4.inference.ttft_s < bf16.inference.ttft_s  # prefill is compute-bound: the fp4 peak shows


def test_fp4_is_refused_where_there_are_no_fp4_tensor_cores():
    w = workload_from_mapping({"model": "llama-3-8b", "precision": "fp4", "gpu": "b200"})
    with pytest.raises(GpuwiseError, match="FP4 tensor cores"):
        predict(w, get_gpu("a100-80gb-sxm"))


def test_offload_costs_pcie_copies_and_a_host_step():
    base = dict(model="llama-3-8b", task="full-finetune", num_gpus=2, sharding="zero2", gpu="h100-sxm")
    on_gpu = predict(workload_from_mapping(base)).training
    off = predict(workload_from_mapping({**base, "offload": "optimizer"})).training
    local = 8_030_261_248 / 2
    pcie = 64e9 * 0.75  # H100 SXM: PCIe Gen5 x16 at the achievable fraction
    expected = local * (2 + 2) / pcie + local * 28 / 50e9  # 16-bit grads down, params up; CPU Adam
    assert off.offload_s == pytest.approx(expected, rel=1e-6)
    assert off.step_time_s == pytest.approx(on_gpu.step_time_s + off.offload_s, rel=1e-6)


def test_decode_steps_pay_for_whole_gemm_tiles():
    from gpuwise.perf.inference import tile_utilization

    assert tile_utilization(300, get_gpu("h100-sxm")) == pytest.approx(300 / 384)  # 3 tiles of 128 rows
    assert tile_utilization(300, get_gpu("b200")) == pytest.approx(300 / 512)  # 2 tiles of 256 rows
    assert tile_utilization(8192, get_gpu("b200")) == 1.0


def test_context_parallel_splits_a_long_sequence_over_gpus():
    base = dict(model="llama-3-8b", task="pretrain", seq_len=32768, gpu="h100-sxm", grad_checkpointing="full")
    one = predict(workload_from_mapping(base)).training
    two = predict(workload_from_mapping({**base, "num_gpus": 2, "context_parallel": 2})).training
    assert two.global_tokens_per_step == one.global_tokens_per_step == 32768
    assert two.micro_batch_tokens == 16384
    speedup = one.step_time_s / two.step_time_s
    assert 1.6 < speedup < 2.0  # half the work per GPU, minus the exposed ring K/V exchange


def test_fp4_gemms_on_sm100_run_at_the_measured_nvfp4_kernel_rate():
    from gpuwise.perf import efficiency as eff
    from gpuwise.perf.inference import StepModel

    b200, gb200 = get_gpu("b200"), get_gpu("gb200")
    # the published points themselves (vLLM PR #20646, B200), log-interpolated between them
    assert eff.fp4_gemm_rate(b200, 256) == pytest.approx(1102.0e12)
    assert eff.fp4_gemm_rate(b200, 16384) == eff.fp4_gemm_rate(b200, 1e6) == pytest.approx(3904.3e12)
    assert 1102.0e12 < eff.fp4_gemm_rate(b200, 362) < 2188.0e12
    assert eff.fp4_gemm_rate(gb200, 256) == pytest.approx(1102.0e12 * 10000 / 9000)  # scaled by FP4 peak
    assert eff.fp4_gemm_rate(get_gpu("rtx-pro-6000-blackwell"), 256) is None  # sm_120: no curve
    assert eff.fp4_gemm_rate(get_gpu("h100-sxm"), 256) is None
    w = workload_from_mapping(
        {"model": "llama-3.3-70b", "precision": "fp4", "gpu": "b200", "task": "serving"}
    )
    model = StepModel(w, b200, *_arch_num(w, b200))
    step = model.step(256, decode_seqs=256, decode_context=1024)
    flops = 2.0 * model.active_params * 256
    assert step.compute_s == pytest.approx(flops / 1102.0e12)  # slower than both rooflines at M = 256
    assert step.compute_s > model.weight_bytes_read(256) / model.decode_bw
    # bf16 on the same GPU keeps the roofline (no measured curve for it): FLOPs at MAMF x stack
    w16 = w.with_changes(precision="bf16")
    m16 = StepModel(w16, b200, *_arch_num(w16, b200))
    bf16 = m16.step(256, decode_seqs=256, decode_context=1024)
    roofline = flops / (m16.peak_lin * m16.e_lin)
    assert bf16.compute_s == pytest.approx(roofline)  # decode attention here is memory-bound


def _arch_num(w, gpu):
    from gpuwise.catalog import get_model

    return get_model(w.model), resolve(w, gpu)
