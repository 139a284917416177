"""Issue 13 (planfix part): global batch kept by every layout, fix before you buy, ranking by gain,
GPU generations, bounded inputs, and the small snippet/wording fixes."""

import subprocess
import sys

import pytest

from gpuwise.catalog import get_gpu
from gpuwise.diagnose import thresholds as T
from gpuwise.plan import make_plan
from gpuwise.plan.gpu_features import ARCH_FEATURES, features, half_dtype
from gpuwise.plan.scaling import layouts
from gpuwise.plan.snippets import hf_trainer, pytorch_loop, workload_yaml
from gpuwise.workload import Workload

PRETRAIN_70B_64 = Workload(
    model="llama-3-70b",
    task="pretrain",
    precision="amp-bf16",
    batch_size=1,
    grad_accum=16,
    seq_len=8192,
    gpu="h100-sxm",
    num_gpus=64,
    sharding="fsdp",
    attention="flash",
    grad_checkpointing="full",
)


# --- 1. scaling keeps the global batch ---------------------------------------------------------------


def test_every_layout_of_70b_on_64_h100_keeps_global_batch_1024():
    assert PRETRAIN_70B_64.global_batch == 1024
    tried = layouts(PRETRAIN_70B_64, 64)
    assert any(w.tp == 8 and w.pp == 8 for w in tried)  # the layout the issue saw drop to 16
    for w in tried:
        assert w.global_batch == 1024, (w.tp, w.pp, w.sharding, w.batch_size, w.grad_accum)
    tp8pp8 = next(w for w in tried if w.tp == 8 and w.pp == 8)
    assert tp8pp8.data_parallel == 1 and tp8pp8.grad_accum == 1024  # accumulation fills the pipeline


BATCH_SPLIT = ("batch_size", "grad_accum")


def test_70b_plan_on_64_h100_keeps_the_batch_and_every_recommended_edit():
    p = make_plan(PRETRAIN_70B_64)
    assert p.config.global_batch_after == 1024 and not p.scaling.global_batch_note
    at_64 = [o for o in p.scaling.options if o.num_gpus == 64 and o.outcome.fits]
    best = max(o.outcome.throughput or 0 for o in at_64)
    pipelined = next(o for o in at_64 if o.tp == 8 and o.pp == 8)
    assert (pipelined.outcome.throughput or 0) > 0.5 * best  # 1,024 micro-batches fill the pipeline
    final = p.config.workload
    for t in p.recommended:  # nothing silently dropped: kept, or the reason says what replaced it
        # batch and accumulation may be re-split by a later step: the global batch (above) is what is kept
        kept = all(getattr(final, k) == v for k, (_, v) in t.changes.items() if k not in BATCH_SPLIT)
        assert kept or "instead" in t.reason, t.id


def test_a_layout_that_cannot_keep_the_global_batch_says_why():
    w = Workload(model="llama-3-8b", task="pretrain", precision="amp-bf16", batch_size=1, gpu="h100-sxm")
    eight = next(x for x in layouts(w, 8) if x.sharding == "ddp")
    assert eight.global_batch == 8 != w.global_batch
    from gpuwise.plan.scaling import global_batch_note

    note = global_batch_note(w, eight)
    assert "cannot keep the global batch of 1" in note and "at least one sequence each" in note


# --- 2. fix before you buy ---------------------------------------------------------------------------

VIT_40 = Workload(
    model="vit-b-16",
    task="cv-train",
    precision="fp32",
    batch_size=32,
    gpu="a10",
    utilization_pct=40,
    goal="throughput",
)


def test_stated_utilization_caps_gains_puts_the_pipeline_first_and_holds_back_hardware():
    p = make_plan(VIT_40)
    first = p.techniques[0]
    assert first.id == "fix_pipeline" and first.verdict == "recommended"
    assert first.impact.throughput_x == pytest.approx(T.PLAN_KPI_BUSY_PCT / 40)
    amp = next(t for t in p.techniques if t.id == "mixed_precision")
    share = 0.6  # idle 60 %: Amdahl
    assert amp.capped_throughput_x == pytest.approx(1 / (share + (1 - share) / amp.impact.throughput_x), 1e-3)
    assert amp.capped_throughput_x < amp.impact.throughput_x and "Stated" in amp.reason
    assert p.scaling.hold_back and p.scaling.reason.startswith("Hold off buying or renting")
    assert "80 % busy" in p.scaling.hold_back
    assert "expect about 40 % of them" in p.config.note
    low = next(f for f in p.diagnosis.findings if f.id == "low_utilization")
    assert low.confidence == T.STATED_UTILIZATION_CONFIDENCE  # the user's figure beats a prediction


def test_measured_input_wait_projects_past_the_kpi_and_releases_the_hold_back():
    from gpuwise.diagnose import Evidence

    waits = Evidence.flat(source="profile", device="cuda", gpu="a10", input_wait_pct=57.0, gpu_idle_pct=58.0)
    p = make_plan(VIT_40.with_changes(utilization_pct=None), evidence=[waits])
    assert p.techniques[0].id == "fix_pipeline" and "Measured" in p.techniques[0].reason
    assert not p.scaling.hold_back  # 42 % busy + 57 % input wait removed: 99 % busy, 1 % idle
    short = Evidence.flat(source="profile", device="cuda", gpu="a10", input_wait_pct=20.0, gpu_idle_pct=58.0)
    held = make_plan(VIT_40.with_changes(utilization_pct=None), evidence=[short])
    assert "Projected after the fixes measured so far: 62 % busy" in held.scaling.hold_back


def test_a_busy_gpu_gets_no_cap_and_no_hold_back():
    p = make_plan(VIT_40.with_changes(utilization_pct=95))
    assert p.techniques[0].id != "fix_pipeline" and not p.scaling.hold_back
    p = make_plan(VIT_40.with_changes(utilization_pct=None))
    assert all(t.capped_throughput_x is None for t in p.techniques)


# --- 3. ranked by expected gain, risk and effort shown -----------------------------------------------


def test_techniques_are_ranked_by_expected_gain_with_risk_and_effort_beside_it():
    p = make_plan(VIT_40.with_changes(utilization_pct=None))
    kept = [t for t in p.techniques if t.verdict != "not-recommended" and not t.needed_to_fit]
    gains = [t.gain_pct for t in kept]
    assert gains == sorted(gains, reverse=True) and kept[0].id == "mixed_precision"
    from gpuwise.report.plan_view import markdown

    text = markdown(p)
    assert "quality risk: low, effort: low" in text
    assert "(none risk)" not in text and "risk)" not in text


# --- 9. hardware generations -------------------------------------------------------------------------


def test_feature_table_follows_the_generation():
    assert set(ARCH_FEATURES) >= {"volta", "turing", "ampere", "ada", "hopper", "blackwell"}
    t4, a100, h100, b200 = (features(get_gpu(g)) for g in ("t4", "a100-80gb-sxm", "h100-sxm", "b200"))
    assert not t4.bf16 and t4.flash_attention == 1 and not t4.nvlink and t4.mig_slices == 0
    assert a100.bf16 and a100.tf32 and not a100.fp8 and a100.mig_slices == 7 and a100.nvlink
    assert h100.fp8 and h100.flash_attention == 3 and not h100.fp4
    assert b200.fp4 and b200.fp8
    assert half_dtype(get_gpu("v100-sxm2-32gb")) == "fp16"


def test_bf16_lora_on_t4_is_told_to_use_fp16_and_qlora_is_not_a_miracle():
    w = Workload(model="llama-3.2-1b", task="lora", precision="bf16", seq_len=1024, gpu="t4")
    p = make_plan(w)
    assert p.config.workload.precision == "fp16"
    assert "precision: fp16   # was bf16" in p.config.snippets["workload.yaml"]
    fix = p.techniques[0]
    assert fix.id == "gpu_support" and "no bf16" in fix.title
    qlora = next(t for t in p.techniques if t.id == "qlora")
    assert qlora.impact.throughput_x is not None and qlora.impact.throughput_x < 1.2  # vs fp16, not 3.5×
    assert 'torch_dtype="float16"' in p.config.snippets["Hugging Face Trainer + PEFT"]


def test_full_finetune_in_bf16_on_t4_keeps_fp32_masters_in_fp16_amp():
    from gpuwise.plan.gpu_features import unsupported

    w = Workload(model="llama-3.2-1b", task="full-finetune", precision="bf16", gpu="t4")
    [(changes, why)] = unsupported(w, get_gpu("t4"))
    assert changes == {"precision": "amp-fp16"} and "GradScaler" in why
    serving = Workload(model="llama-3.2-1b", task="serving", precision="bf16", gpu="t4")
    [(changes, why)] = unsupported(serving, get_gpu("t4"))
    assert changes == {"precision": "fp16"} and "GradScaler" not in why
    assert unsupported(w.with_changes(gpu="a100-80gb-sxm"), get_gpu("a100-80gb-sxm")) == []


def test_v100_keeps_fp16_amp_and_drops_flash_attention():
    w = Workload(model="llama-3.2-1b", task="lora", precision="fp32", attention="flash", gpu="v100-sxm2-32gb")
    final = make_plan(w).config.workload
    assert final.precision == "amp-fp16" and final.attention == "sdpa"


def test_qlora_snippet_on_t4_computes_in_fp16():
    w = Workload(model="llama-3.2-1b", task="qlora", precision="nf4", gpu="t4", num_gpus=2, sharding="ddp")
    text = hf_trainer(w)
    assert "bnb_4bit_compute_dtype=torch.float16" in text and "fp16=True" in text and "bf16" not in text


# --- 10. unbounded inputs ----------------------------------------------------------------------------

EXTREMES = [
    ["-b", "1000000000000"],
    ["-b", "999999999989"],  # a prime: no divisor but 1 and itself
    ["--accum", "1000000000"],
    ["-s", "1000000000"],
    ["-n", "100000"],
    ["--concurrency", "1000000000", "-t", "serving"],
]


@pytest.mark.slow
@pytest.mark.parametrize("extra", EXTREMES, ids=lambda a: " ".join(a))
def test_plan_finishes_on_extreme_inputs(extra, tmp_path):
    """A guard against unbounded searches (the issue saw > 120 s): generous, not a speed test."""
    cmd = [sys.executable, "-m", "gpuwise", "plan", "llama-3-8b", "-t", "lora", "-g", "a100-80gb-sxm", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 2), done.stderr
    assert "Traceback" not in done.stderr


def test_out_of_range_inputs_are_said():
    # the largest batch the workload accepts (workload/limits.py; 10**12 is refused up front now)
    huge = make_plan(Workload(model="llama-3-8b", task="lora", gpu="a100-80gb-sxm", batch_size=10**6))
    assert any("largest catalog GPU" in n and "PiB per GPU" in n for n in huge.notes)
    long = make_plan(Workload(model="llama-3-8b", task="lora", gpu="h100-sxm", seq_len=32768))
    assert any("beyond llama-3-8b's context of 8,192" in n for n in long.notes)
    ok = make_plan(Workload(model="llama-3-8b", task="lora", gpu="h100-sxm", seq_len=4096))
    assert not any("beyond" in n or "largest catalog GPU" in n for n in ok.notes)


# --- 11. smaller items -------------------------------------------------------------------------------


def test_qlora_ddp_snippet_loads_each_rank_on_its_own_gpu():
    w = Workload(model="llama-3-8b", task="qlora", precision="nf4", gpu="a100-80gb-sxm", num_gpus=2)
    text = hf_trainer(w)
    assert 'device_map={"": local_rank}' in text and "LOCAL_RANK" in text
    compile(text, "hf", "exec")
    assert "device_map" not in hf_trainer(w.with_changes(num_gpus=1))
    fsdp = hf_trainer(w.with_changes(sharding="fsdp"))  # FSDP places the shards itself
    assert "device_map" not in fsdp and "bnb_4bit_quant_storage=torch.bfloat16" in fsdp
    compile(fsdp, "hf", "exec")


def test_accumulation_one_has_no_division_or_modulo():
    w = Workload(model="llama-3-8b", task="lora", gpu="a100-80gb-sxm", grad_accum=1)
    loop = pytorch_loop(w)
    assert "/ 1" not in loop and "% 1" not in loop and "opt.step()" in loop
    compile(loop, "loop", "exec")
    assert "/ 4" in pytorch_loop(w.with_changes(grad_accum=4)) and "% 4 == 0" in pytorch_loop(
        w.with_changes(grad_accum=4)
    )


def test_yaml_leaves_out_empty_library_versions_and_tools_text_is_whole():
    w = Workload(model="llama-3-8b", task="qlora", precision="nf4", gpu="a100-80gb-sxm")
    assert "library_versions" not in workload_yaml(w, {})
    p = make_plan(w)
    bnb = next(t for t in p.tools if t.id == "bitsandbytes")
    assert bnb.why.endswith("NF4 base weights.") and " and ." not in bnb.why


def test_memory_and_cost_warn_on_out_of_range_results_and_max_seq_says_when_capped(cli):
    huge = cli("memory", "llama-3-8b", "-t", "lora", "-g", "a100-80gb-sxm", "-b", "1000000")
    assert huge.exit_code == 0 and "gpuwise: warning: The job as given needs" in huge.stderr
    refused = cli("memory", "llama-3-8b", "-t", "lora", "-g", "a100-80gb-sxm", "-b", "1000000000000")
    assert refused.exit_code == 2 and "--batch must be" in refused.stderr
    years = cli("cost", "llama-3-8b", "-t", "lora", "-g", "a100-80gb-sxm", "--set", "train_tokens=1e15")
    assert years.exit_code == 0 and "years: check train_tokens" in years.stderr
    capped = cli("memory", "tinyllama-1.1b", "-t", "lora", "-g", "h100-sxm", "--max-seq", "--json")
    assert capped.exit_code == 0
    import json

    answer = json.loads(capped.stdout)["max_seq_len"]
    assert answer["value"] == 2048 and answer["capped_by_context"] is True
    plain = cli("memory", "llama-3.2-1b", "-t", "lora", "-g", "h100-sxm")
    assert "warning" not in plain.stderr
