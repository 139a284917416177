"""The kernel / runtime-API taxonomy (trace/data/kernel_taxonomy.csv) on real kernel names.

The names below are copied from real profiles and library sources (each row of the CSV names its
source); the look-alike traces put them on a timeline the way Kineto writes it, since no public trace
holds a Blackwell MoE step or a SageAttention swap.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import pytest

from gpuwise.trace.analyze import analyze_traces
from gpuwise.trace.parser import parse_trace
from gpuwise.trace.taxonomy import (
    KERNEL_CATEGORIES,
    NAME_READ_CHARS,
    _branches,
    _kernel_runs,
    _Matcher,
    api_role,
    entries,
    kernel_category,
    kernel_entry,
    matmul_precision,
    runtime_platform,
    without_parameters,
)

REPO = Path(__file__).resolve().parents[2]
AMD = "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"

# (real kernel name, category, precision the name shows or None)
REAL_KERNELS = [
    ("nvjet_tst_128x256_64x6_2x1_2cta_v_bz_TNT", "gemm", None),
    ("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "gemm", None),
    (
        "bmm_Bfloat16_E2m1E2m1_Fp32_Ab16_Bb16_t128x128x256u2_s6_et128x128_m256x128x64_c2x1x1_rM_TN_"
        "transOut_schPd2x1x2x3_biasFp32M_bN_rgTma_clmp_dynB_sm100f",
        "gemm",
        "fp4",
    ),
    (
        "bmm_E4m3_E4m3E4m3_Fp32_t128x8x512u2_s4_et128x8_m128x8x64_cga1x1x1_16dp256b_rM_TN_transOut_schedS_bN_sm100f",
        "gemm",
        "fp8",
    ),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_CMS_SN_LDSB0_AFC1", "gemm", "bf16"),
    ("Cijk_Alik_Bljk_HHS_BH_Bias_HAS_SAV_UserArgs_MT16x16x512_MI16x16x1", "gemm", "fp16"),
    ("Cijk_Alik_Bljk_F8F8S_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64", "gemm", "fp8"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1", "gemm", "fp32"),
    ("Cijk_Ailk_Bjlk_I8II_BH_MT128x128x64", "gemm", "int8"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm", "bf16"),
    ("volta_sgemm_128x64_nn", "gemm", "fp32"),
    ("cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>", "gemm", "bf16"),
    (
        "cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true>",
        "gemm",
        "bf16",
    ),
    ("triton_tem_fused_mm_0", "gemm", None),
    ("fused_moe_kernel", "gemm", None),
    (
        "void deep_gemm::fp8_gemm_kernel<128u, 128u, 128u>(__nv_bfloat16*, float*, int*, unsigned int)",
        "gemm",
        "fp8",
    ),
    (
        "kernel_cutlass_kernel_flashinfergemmkernelsdense_blockscaled_gemm_sm100Sm100BlockScaledPersistentDense",
        "gemm",
        None,
    ),
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false>(Flash_fwd_params)",
        "attention",
        "bf16",
    ),
    (
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
        "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1> >, 128, cutlass::bfloat16_t, float> > > >"
        "(flash::FlashAttnFwdSm90<>::Params)",
        "attention",
        "bf16",
    ),
    (
        "void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<> >(Params)",
        "attention",
        None,
    ),
    (
        "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<>::Params)",
        "attention",
        "fp16",
    ),
    (
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0",
        "attention",
        "fp16",
    ),
    ("fmhaSm100fKernel_QkvE4m3OBfloat16HQk128HV128HVPerCta128PagedKvDenseP32", "attention", "fp8"),
    ("_ZN5aiter50fmha_fwd_hd128_bf16_causal_a32_rtz_pssk_recompile", "attention", "bf16"),
    ("_sage_fwd", "attention", None),
    ("qk_int8_sv_f8_accum_f32_attn_inst_buf", "attention", "int8"),
    ("void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128, 16, 128>(float*)", "attention", "bf16"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", None),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication", None),
    (
        "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16*, "
        "unsigned long, unsigned long, unsigned int*)",
        "communication",
        None,
    ),
    (
        "void cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
        "communication",
        None,
    ),
    ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)", "communication", None),
    ("void mscclpp::allreduce8<__nv_bfloat16>(__nv_bfloat16*)", "communication", None),
    (
        "void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*)",
        "reduction",
        None,
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float> > >()",
        "reduction",
        None,
    ),
    ("triton_red_fused__to_copy_add_mean_pow_rsqrt_0", "reduction", None),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >()",
        "elementwise",
        None,
    ),
    (
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>()",
        "elementwise",
        None,
    ),
    (
        "implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>",
        "convolution",
        "fp32",
    ),
]


@pytest.mark.parametrize(
    ("name", "category", "precision"), REAL_KERNELS, ids=[n[:40] for n, _, _ in REAL_KERNELS]
)
def test_real_kernel_names_get_their_category_and_precision(name, category, precision):
    assert kernel_category(name) == category
    if category in ("gemm", "convolution", "attention"):
        assert matmul_precision(name) == precision
    entry = kernel_entry(name)
    assert entry is not None and entry.category == category and entry.source


def test_a_blackwell_bmm_with_bN_in_its_name_is_not_a_reduction():
    name = _real("bmm_Bfloat16")
    assert "_bN_" in name and kernel_category(name) == "gemm"


@pytest.mark.parametrize(
    ("call", "role"),
    [
        ("cudaMemcpy", "blocking_copy"),
        ("hipMemcpyWithStream", "blocking_copy"),
        ("cuMemcpyDtoH_v2", "blocking_copy"),
        ("cudaMemcpyAsync", None),
        ("cuMemcpyHtoDAsync_v2", None),
        ("cudaDeviceSynchronize", "host_sync"),
        ("hipStreamSynchronize", "host_sync"),
        ("cudaEventSynchronize", "host_sync"),
        ("cudaStreamWaitEvent", "stream_wait"),
        ("hipStreamWaitEvent", "stream_wait"),
        ("cudaStreamBeginCapture", "graph_capture"),
        ("hipStreamGetCaptureInfo", "graph_capture"),
        ("cudaGraphInstantiateWithFlags", "graph_capture"),
        ("cudaGraphLaunch", "graph_launch"),
        ("hipGraphLaunch", "graph_launch"),
        ("cudaLaunchKernel", "kernel_launch"),
        ("hipExtModuleLaunchKernel", "kernel_launch"),
        ("cuLaunchKernel", "kernel_launch"),
        ("cudaEventCreate", "setup"),
        ("aten::mm", None),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", None),
    ],
)
def test_runtime_calls_get_their_role(call, role):
    assert api_role(call) == role


def test_every_row_is_valid_and_names_its_source():
    rows = list(csv.DictReader((REPO / "src/gpuwise/trace/data/kernel_taxonomy.csv").open(encoding="utf-8")))
    assert len(rows) == len(entries()) > 40
    assert all(e.pattern.pattern == e.regex for e in entries())  # every pattern compiles
    assert all(r["source"].strip() and r["library"].strip() for r in rows if r["kind"] != "precision")
    assert {r["category"] for r in rows if r["kind"] == "kernel"} == set(KERNEL_CATEGORIES)
    # every kernel row recognises at least one of the real names above (no dead rows)
    hit = {id(kernel_entry(n)) for n, _, _ in REAL_KERNELS}
    dead = [e.pattern.pattern[:40] for e in entries() if e.kind == "kernel" and id(e) not in hit]
    assert len(dead) <= 12, dead  # generic fallback rows (by name) need no dedicated example


def test_platform_from_runtime_calls():
    assert runtime_platform(["hipLaunchKernel", "aten::mm"]) == "rocm"
    assert runtime_platform(["cudaLaunchKernel"]) == "cuda"
    assert runtime_platform(["aten::mm"]) is None


def test_the_real_rocm_trace_has_gemm_with_precision_a_hip_sync_and_no_cuda_label(trace_dir):
    rank = analyze_traces([trace_dir / AMD]).ranks[0]
    assert rank.kernels.categories["gemm"]["count"] == 2  # the two Cijk_ (Tensile) kernels
    assert rank.kernels.precision_us.get("fp32", 0) > 0  # _SB_: single precision
    assert rank.device.kind == "rocm"
    # a blocking copy is a synchronization (the one hipDeviceSynchronize falls outside the steps)
    assert rank.sync.by_name == {"hipMemcpyWithStream": 2} and rank.sync.scope == "steps"


# -- look-alike traces ------------------------------------------------------------------------------


def _trace(
    path: Path, kernels: list[tuple[str, float]], steps: int = 3, api: str = "cudaLaunchKernel"
) -> Path:
    """Kineto-shaped trace: per step a ProfilerStep, one launch per kernel, kernels back to back (µs)."""
    events: list[dict] = []
    t, corr = 1000.0, 1
    for step in range(steps):
        step_start = t
        for name, dur in kernels:
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": api,
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 4,
                    "args": {"correlation": corr},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 5,
                    "dur": dur,
                    "args": {"stream": 7, "correlation": corr, "device": 0},
                }
            )
            t += dur + 6
            corr += 1
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 1,
                "tid": 1,
                "ts": step_start - 1,
                "dur": t - step_start + 2,
            }
        )
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": []}))
    return path


def _real(fragment: str) -> str:
    return next(name for name, _, _ in REAL_KERNELS if fragment in name)


FA2 = _real("flash_fwd_kernel")
SAGE = _real("sage_fwd")


def test_compare_after_an_attention_kernel_swap_keeps_attention(tmp_path, cli):
    gemm = _real("nvjet_tst_128x256")
    a = _trace(tmp_path / "fa2.json", [(gemm, 400.0), (FA2, 300.0)])
    b = _trace(tmp_path / "sage.json", [(gemm, 400.0), (SAGE, 150.0)])
    out = cli("trace", "--compare", str(a), str(b), "--json")
    assert out.exit_code == 0, out.stderr
    rows = {c["name"]: c for c in json.loads(out.stdout)["categories"]}
    attention = rows["attention"]
    assert attention["a"] > 0 and attention["b"] > 0
    assert attention["b"] == pytest.approx(attention["a"] / 2, rel=0.05)  # halved, not "−92 %" or gone
    assert "other" not in rows


def test_a_blackwell_moe_step_and_an_unknown_kernel(tmp_path):
    bmm, allreduce = _real("bmm_Bfloat16"), _real("multimem_all_reduce")
    path = _trace(
        tmp_path / "b200.json",
        [(bmm, 480.0), (allreduce, 100.0), ("mystery_kernel_v2", 120.0), ("tiny_helper_kernel", 10.0)],
    )
    k = analyze_traces([path]).ranks[0].kernels
    assert k.categories["gemm"]["pct"] > 60 and "reduction" not in k.categories
    assert k.categories["communication"]["count"] == k.categories["gemm"]["count"] >= 2
    doc = k.to_dict()
    assert [u["name"] for u in doc["unclassified"]] == ["mystery_kernel_v2"]  # 10 µs one is under 5 %
    assert doc["unclassified"][0]["pct"] == pytest.approx(100 * 120 / 710, abs=0.01)
    assert any("mystery_kernel_v2" in note for note in k.notes)


def test_a_hip_trace_without_device_properties_is_not_labelled_cuda(tmp_path):
    path = _trace(tmp_path / "mi300.json", [(_real("_BBS_"), 300.0)], api="hipLaunchKernel")
    rank = analyze_traces([path]).ranks[0]
    assert rank.device.kind == "rocm" and set(rank.kernels.precision_us) == {"bf16"}


# -- reading: linear time on whitespace --------------------------------------------------------------


def test_a_gzip_whitespace_bomb_inside_trace_events_is_read(tmp_path):
    """128 MiB of whitespace between two events (a 0.6 MB gzip): read to the end, both events kept.
    The time is measured in benchmarks/trace_whitespace_bomb.py (1 GiB), not asserted here."""
    path = tmp_path / "bomb.json.gz"
    event = b'{"ph":"X","cat":"kernel","name":"k","ts":%d,"dur":2,"tid":7,"pid":0,"args":{"stream":7}}'
    block = b" \n\t\r" * (1 << 18)  # 1 MiB
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b'{"traceEvents": [' + block + event % 1 + block)
        for _ in range(126):
            out.write(block)
        out.write(b"," + event % 5 + b"]}")
    table = parse_trace(path)
    assert table.events_total == 2 and table.ts.tolist() == [1.0, 5.0]
    assert table.json_bytes > 128 << 20


# --- the fast matcher (taxonomy._Matcher) answers exactly what a case-insensitive re.search of each row
# does: literal branches are substring tests in the lower-cased name, the rest case-sensitive searches
# (several times faster on the long templated names of real traces); held to the regexes as written, on
# real kernel and runtime names and on the corner cases of case folding.

REAL_TRACES = (
    AMD,
    "hta/trace_diff/test/test.json.gz",
    "kineto/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
)
CORNER_CASES = [
    "",
    "NCCLKERNEL_x",
    "xncclDevKernel_AllReduce",  # ^-anchored rows must not match inside
    "c10d::allreduce",
    "abc10d::x",  # \b before c10d
    "K\u212aernel_gemm",  # the Kelvin sign folds to 'k' under re.I: not ASCII, the exact regex decides
    "\u017fgemm",  # long s folds to 's'
    "\u0130nt8 gemm",
    "cuMemcpyDtoH_v2",
    "cuMemcpyDtoHAsync_v2",  # a negative lookahead
    "hipMemcpyWithStream",
    "CudaDeviceSynchronize",
    "SM90_XMMA_GEMM",
    "a" * 300 + "(",
]


def _names(trace_dir) -> list[str]:
    names = {n for n, _, _ in REAL_KERNELS} | set(CORNER_CASES)
    for rel in REAL_TRACES:
        names.update(n for n in parse_trace(trace_dir / rel).names if isinstance(n, str))
    return sorted(names)


def test_every_row_matches_as_its_regex(trace_dir):
    names = _names(trace_dir)
    assert len(names) > 300
    wrong = [
        (e.regex[:40], text[:60])
        for e in entries()
        for name in names
        for text in (name[:NAME_READ_CHARS], without_parameters(name))
        if e.matches(text) != (e.pattern.search(text) is not None)
    ]
    assert wrong == []


def test_every_run_of_kernel_rows_matches_as_its_alternation(trace_dir):
    heads = [without_parameters(n) for n in _names(trace_dir)]
    for _, matcher in _kernel_runs():
        regex = re.compile(matcher.regex, re.I)
        assert [matcher(h) for h in heads] == [regex.search(h) is not None for h in heads]


@pytest.mark.parametrize(
    ("regex", "branches"),
    [
        ("a|b", ["a", "b"]),
        ("(a|b)c|d", ["(a|b)c", "d"]),
        (r"a\|b|c", [r"a\|b", "c"]),
        ("[|]x|y", ["[|]x", "y"]),
        ("[]|]x|y", ["[]|]x", "y"]),
        ("a||b", ["a", "", "b"]),
    ],
)
def test_branches_split_only_at_top_level(regex, branches):
    assert _branches(regex) == branches


@pytest.mark.parametrize("regex", [r"\Wfoo", r"(?i)x", r"(?P<n>a)b", r"\x41", "caf\u00e9"])
def test_patterns_lower_casing_could_change_keep_the_exact_regex(regex):
    matcher = _Matcher(regex)
    assert matcher.exact is not None
    for text in ("FOO", " foo", "A", "ab", "CAF\u00c9", "xx"):
        assert matcher(text) == (re.compile(regex, re.I).search(text) is not None)
