"""The planner: sections, computed impacts, fit search, evidence merging, goals, hardware, renderers,
bad input."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from gpuwise.catalog import get_gpu
from gpuwise.diagnose import Evidence
from gpuwise.diagnose import thresholds as T
from gpuwise.errors import GpuwiseError
from gpuwise.memory import estimate_memory
from gpuwise.perf import predict
from gpuwise.plan import make_plan
from gpuwise.plan.evaluate import Evaluator
from gpuwise.plan.goal import comfortable
from gpuwise.report import html as html_report
from gpuwise.report import markdown as md_report
from gpuwise.report.document import Bars, Code, Document, Paragraph, Table
from gpuwise.workload import load_workload, workload_from_mapping

REPO = Path(__file__).resolve().parents[2]

SECTIONS = ("fit", "diagnosis", "techniques", "config", "memory", "scaling", "tools", "hardware")


def plan_for(**spec):
    return make_plan(workload_from_mapping(spec))


@pytest.fixture(scope="module")
def lora_plan():
    return make_plan(load_workload(REPO / "examples" / "llama-3-8b-lora.yaml"))


def test_plan_has_every_section_and_serializes(lora_plan):
    data = lora_plan.to_dict()
    assert all(key in data for key in SECTIONS)
    back = json.loads(orjson.dumps(data))
    assert back["memory"]["current"]["breakdown_bytes"]["weights"] > 0
    assert back["scaling"]["strategy"] and back["tools"] and back["hardware"]
    assert back["evidence"][-1]["source"] == "prediction"


def test_technique_impacts_are_the_models_run_on_the_changed_workload(lora_plan):
    w, ev = lora_plan.workload, Evaluator()
    singles = [t for t in lora_plan.techniques if t.verdict != "recommended"]
    assert singles
    for t in singles:
        edited = w.with_changes(**{k: after for k, (_, after) in t.changes.items()})
        assert ev.outcome(edited) == t.after
        assert t.impact.memory_saved_bytes == t.before.peak_bytes - t.after.peak_bytes
    for t in lora_plan.recommended:  # each recommended step is measured from the step before it
        assert t.after.peak_bytes != t.before.peak_bytes or t.after.throughput != t.before.throughput


def test_gradient_accumulation_keeps_the_global_batch(lora_plan):
    w = lora_plan.workload
    assert not lora_plan.current.fits  # batch 4 × 2048 without checkpointing does not fit 80 GB
    batch = [t for t in lora_plan.techniques if t.id == "smaller_batch"]
    assert batch and batch[0].verdict == "recommended"
    for t in batch:
        assert t.changes["batch_size"][1] * t.changes["grad_accum"][1] == w.batch_size * w.grad_accum
    c = lora_plan.config
    assert c.global_batch_before == c.global_batch_after == 16
    assert comfortable(c.outcome)
    hf = c.snippets["Hugging Face Trainer + PEFT"]
    assert f"per_device_train_batch_size={c.workload.batch_size}" in hf
    assert f"gradient_accumulation_steps={c.workload.grad_accum}" in hf
    assert "# was 4" in c.snippets["workload.yaml"]


def test_does_not_fit_finding_names_the_computed_fixes(lora_plan):
    oom = next(f for f in lora_plan.diagnosis.findings if f.id == "oom_risk")
    assert oom.severity == "critical" and oom.confidence == "low"
    assert "What makes it fit" in oom.fix and "GiB" in oom.fix
    assert oom.metrics["fit_options_bytes"]


def test_serving_that_fits_nowhere_says_what_would_make_it_fit():
    p = plan_for(model="llama-3.1-405b", task="serving", gpu="l4", seq_len=4096, output_len=512)
    assert not p.fit.fits_current and not p.fit.fits_anywhere
    assert "fits on no catalog GPU" in p.fit.message
    labels = [o.label for o in p.fit.options]
    assert any("bit weights" in label for label in labels)  # quantization
    assert any(label.startswith("more GPUs") for label in labels)  # tensor parallelism
    for option in p.fit.options:
        assert option.outcome.fits and option.outcome.headroom_pct >= T.OOM_HEADROOM_PCT


def test_training_that_fits_nowhere_offers_lora_and_sharding():
    p = plan_for(
        model="llama-3.1-405b", task="full-finetune", gpu="h100-sxm", precision="amp-bf16", seq_len=4096
    )
    assert not p.fit.fits_anywhere
    labels = " | ".join(o.label for o in p.fit.options)
    assert "more GPUs" in labels and ("FSDP" in labels or "TP" in labels)
    scaled = next(o for o in p.fit.options if o.label.startswith("more GPUs"))
    assert scaled.num_gpus > 8 and comfortable(scaled.outcome)


def test_fit_search_prefers_keeping_full_fine_tuning_over_lora():
    p = make_plan(load_workload(REPO / "examples" / "full-finetune-7b.yaml"))
    assert not p.current.fits
    assert p.config.workload.task == "full-finetune"  # lower-risk edits fit first; LoRA stays an option
    assert comfortable(p.config.outcome)
    lora = next(t for t in p.techniques if t.id == "lora")
    assert lora.quality_risk == "changes-task" and lora.verdict != "recommended"


def test_measured_evidence_ranks_first_and_fills_the_idle_causes(tmp_path):
    measured = Evidence.flat(
        source="profile",
        label="train.py",
        step_time_s=0.2,
        input_wait_pct=40.0,
        loader_num_workers=0,
        cpu_count=8,
        gpu_util_pct=45.0,
    )
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"schema_version": 1, "kind": "profile", "evidence": measured.to_dict()}))
    w = workload_from_mapping(
        {
            "model": "vit-b-16",
            "task": "cv-train",
            "gpu": "a10",
            "batch_size": 32,
            "precision": "amp-bf16",
            "utilization_pct": 90,
        }
    )
    p = make_plan(w, evidence_files=[path])
    first = p.diagnosis.findings[0]
    assert first.id == "input_bound" and first.confidence == "high" and first.source == "profile"
    assert p.evidence[-1].activity.gpu_util_pct is None  # the user's 90 % gives way to the measured 45 %
    causes = {c.id: c.status for c in p.diagnosis.idle_causes}
    assert causes["input_bound"] == "found"
    assert (
        "fix: input_bound" in p.config.snippets and "num_workers=7" in p.config.snippets["fix: input_bound"]
    )
    assert "Measured" in p.diagnosis.summary


def test_measured_idle_caps_predicted_speedups(tmp_path):
    measured = Evidence.flat(
        source="trace", step_time_s=0.15, input_wait_pct=30.0, fp32_matmul_pct=100.0, tensor_core_speedup=8.0
    )
    w = workload_from_mapping(
        {"model": "vit-b-16", "task": "cv-train", "gpu": "a10", "batch_size": 32, "precision": "fp32"}
    )
    p = make_plan(w, evidence=[measured])
    amp = next(t for t in p.techniques if t.id == "mixed_precision")
    cap = 1 / (0.3 + 0.7 / amp.impact.throughput_x)
    assert f"at most {cap:.2f}×" in amp.reason


def test_trace_evidence_from_the_trace_command(trace_dir, tmp_path, cli):
    trace = next((trace_dir / "kineto" / "samples" / "resnet50_num_workers_0").glob("*.json.gz"))
    out = cli("trace", str(trace), "--json")
    assert out.exit_code == 0, out.stderr
    doc = tmp_path / "trace.json"
    doc.write_text(out.stdout)
    result = cli(
        "plan",
        "vit-b-16",
        "-t",
        "cv-train",
        "-g",
        "v100-sxm2-32gb",
        "-b",
        "32",
        "-p",
        "fp32",
        "--evidence",
        str(doc),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    plan = result.json()["plan"]
    ids = {f["id"]: f for f in plan["diagnosis"]["findings"]}
    assert ids["input_bound"]["source"] == "trace" and ids["input_bound"]["confidence"] == "high"
    assert any(e["source"] == "trace" for e in plan["evidence"])


def test_prediction_rules_fire_on_eager_attention_and_unfused_adamw():
    p = plan_for(
        model="llama-3.2-1b",
        task="full-finetune",
        gpu="h100-sxm",
        attention="eager",
        seq_len=4096,
        batch_size=2,
        precision="amp-bf16",
        optimizer="adamw",
    )
    found = {f.id: f for f in p.diagnosis.findings}
    assert (
        found["no_flash_attention"].metrics["attention_scores_bytes"]
        == p.evidence[-1].model.attention_scores_bytes
        > 0
    )
    assert "no_fused_optimizer" in found
    assert p.recommended[0].id == "flash_attention"  # the score matrices are what does not fit
    small = plan_for(
        model="llama-3.2-1b",
        task="full-finetune",
        gpu="h100-sxm",
        seq_len=1024,
        batch_size=1,
        precision="amp-bf16",
        optimizer="adamw",
    )
    assert small.current.fits and "no_fused_optimizer" in {f.id for f in small.diagnosis.findings}
    fused = next(t for t in small.techniques if t.id == "fused_optimizer")
    # perf models the optimizer step (foreach AdamW moves ~80 B/param, fused ~28 B), so the gain is computed
    # recommended alone; kept out of the config only when a later edit replaces the optimizer (8-bit AdamW)
    assert fused.impact.throughput_x > 1.3
    assert fused.verdict == "recommended" or any("a later edit replaces it" in n for n in small.notes)


def test_goal_changes_the_recommendation():
    base = dict(
        model="mistral-7b-v0.1",
        task="serving",
        gpu="l4",
        seq_len=1024,
        output_len=256,
        concurrency=16,
        usd_per_gpu_hour=0.8,
    )
    cost, latency = plan_for(**base, goal="cost"), plan_for(**base, goal="latency")
    assert cost.config.outcome.usd_per_1m < cost.current.usd_per_1m
    assert latency.config.outcome.tpot_ms < latency.current.tpot_ms
    assert cost.config.workload.concurrency > 16 >= latency.config.workload.concurrency


def test_prediction_evidence_for_serving():
    p = plan_for(model="llama-3.1-8b", task="serving", gpu="a100-80gb-sxm", seq_len=8192, concurrency=32)
    ev = p.evidence[-1]
    assert ev.source == "prediction" and ev.model.weight_bits == 16 and ev.model.kv_cache_bits == 16
    assert ev.model.kv_cache_bytes > 0 and ev.model.decode_bandwidth_bound is not None
    assert "kv_fp8" in {t.id for t in p.techniques}


def test_bound_uses_the_performance_models_names_end_to_end():
    """Outcome.bound is the perf model's Bound; the decode rule and the summary read it by those names."""
    p = plan_for(model="llama-3.1-8b", task="serving", gpu="a100-80gb-sxm", seq_len=2048, concurrency=1)
    decode_bound = predict(p.workload).inference.decode_bound
    assert decode_bound == p.current.bound == p.diagnosis.bound == "memory_bandwidth"  # one stream
    assert p.evidence[-1].model.decode_bandwidth_bound is True
    assert "decode_memory_bound" in {f.id for f in p.diagnosis.findings}
    assert p.diagnosis.summary.startswith("Decode is memory-bandwidth-bound")


def test_requirements_rank_first_and_consumer_gpus_carry_caveats():
    p = plan_for(model="llama-3.1-8b", task="serving", gpu="rtx-4090", requirements=["ecc"])
    fitting = [h for h in p.hardware if comfortable(h.outcome)]
    meets = [h.meets_requirements for h in fitting]
    assert meets == sorted(meets, reverse=True) and meets[0]
    assert all(get_gpu(h.gpu).ecc for h in fitting if h.meets_requirements)
    rtx = next(h for h in p.hardware if h.gpu == "rtx-4090")
    assert not rtx.meets_requirements and any("licence" in c for c in rtx.caveats)


def test_scaling_for_tensor_parallel_serving_says_nvlink_matters():
    p = make_plan(load_workload(REPO / "examples" / "inference-70b.yaml"))
    s = p.scaling
    assert "TP" in s.strategy and s.num_gpus >= 2
    assert (
        s.nvlink in {"required", "recommended"} and s.nvlink_slowdown_pct > 0 and "NVLink" in s.nvlink_reason
    )


def test_advice_follows_the_framework_you_run():
    w = load_workload(REPO / "examples" / "pretrain-8xh100.yaml")
    p = make_plan(w.with_changes(framework="deepspeed"))
    assert p.config.workload.sharding in {"fsdp", "zero2", "zero3"}
    ds = json.loads(p.config.snippets["DeepSpeed ds_config.json"])
    assert (
        ds["zero_optimization"]["stage"] in {2, 3}
        and ds["gradient_accumulation_steps"] == p.config.workload.grad_accum
    )
    assert "PyTorch FSDP2" not in p.config.snippets
    assert p.tools[0].id == "deepspeed" and "fsdp" not in {t.id for t in p.tools}


def test_single_gpu_job_needs_no_interconnect(lora_plan):
    assert lora_plan.scaling.strategy == "single GPU" and lora_plan.scaling.nvlink == "not-needed"


def test_document_renderers_escape_their_formats(tmp_path):
    doc = Document(
        "plan <x>",
        [
            Paragraph("a <script>alert(1)</script>"),
            Table(["a|b", "n"], [["1|2", "3"]], align="lr"),
            Bars([("weights", 5.0, "5 GiB")], 10.0, "5 of 10"),
            Code("```\nx = 1\n```", label="cfg"),
        ],
    )
    html = html_report.render(doc)
    assert "<script>" not in html and "&lt;script&gt;" in html and 'style="width:50.0%"' in html
    md = md_report.render(doc)
    assert "a\\|b" in md and "````" in md and "█" * 12 in md
    with pytest.raises(GpuwiseError, match="is a directory"):
        html_report.write(doc, tmp_path)
    with pytest.raises(GpuwiseError, match="does not exist"):
        html_report.write(doc, tmp_path / "missing" / "plan.html")


def test_cli_markdown_html_and_json(cli, tmp_path):
    html_path = tmp_path / "plan.html"
    md = cli("plan", "examples/lora-7b.yaml", "--markdown", "--html", str(html_path))
    assert md.exit_code == 0, md.stderr
    for heading in (
        "## 1. Diagnosis",
        "## 2. Techniques",
        "## 3. Configuration changes",
        "## 4. VRAM per GPU",
        "## 5. Scaling",
        "## 6. Tools",
        "## Hardware options",
    ):
        assert heading in md.stdout
    page = html_path.read_text()
    assert page.startswith("<!doctype html>") and "<h2>5. Scaling</h2>" in page
    js = cli("plan", "examples/lora-7b.yaml", "--json")
    assert js.json()["kind"] == "plan" and js.json()["schema_version"] == 2
    term = cli("plan", "examples/lora-7b.yaml")
    assert term.exit_code == 0 and "1. Diagnosis" in term.stdout and "Hardware options" in term.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--evidence", "missing.json"], "evidence file missing.json does not exist"),
        (["--model-factory", "m:f"], "only apply with --traced"),
        (["--html", "no/such/dir/plan.html"], "does not exist"),
        (["-g", "h100"], "did you mean"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args, message):
    result = cli("plan", "examples/lora-7b.yaml", *args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_corrupt_evidence_names_file_and_line(cli, tmp_path):
    bad = tmp_path / "run.json"
    bad.write_text('{"evidence": {"source": "profile",\n  "step_time_s": }\n')
    result = cli("plan", "examples/lora-7b.yaml", "--evidence", str(bad))
    assert result.exit_code == 2 and "run.json: invalid JSON at line 2" in result.stderr


SLOW_LOADER_SCRIPT = """
import time
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        time.sleep(0.004)  # a slow decode: the loop waits for data
        return torch.randn(64), torch.randint(0, 4, ())


model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Slow(), batch_size=8, num_workers=0):
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
"""


def test_cpu_run_evidence_is_read_for_its_host_side_only():
    """Issue 11.10: a CPU run's 28 % input wait is no "GPU idles 28 %" for a plan on an a10."""
    cpu_run = Evidence.flat(
        source="profile",
        label="train.py",
        device="cpu",
        step_time_s=0.2,
        step_times_s=[0.2] * 20,
        phase_s={"data_wait": 0.056, "forward": 0.144},
        input_wait_pct=28.0,
        loader_num_workers=0,
        cpu_count=2,
        cpu_util_pct=30.0,
    )
    w = workload_from_mapping(
        {"model": "vit-b-16", "task": "cv-train", "gpu": "a10", "batch_size": 32, "precision": "fp32"}
    )
    p = make_plan(w, evidence=[cpu_run])
    text = " ".join(t.reason for t in p.techniques)
    assert "GPU idles" not in text and "idles 28" not in text
    assert any("(train.py) comes from a CPU-only run" in n and "lower bound" in n for n in p.notes)
    found = {f.id: f for f in p.diagnosis.findings}
    assert found["input_bound"].confidence == "medium" and "device idles" not in found["input_bound"].summary
    kept = next(e for e in p.evidence if e.source == "profile")
    assert (
        kept.steps.step_time_s is None
        and kept.steps.step_times_s == []
        and kept.loader.input_wait_pct == 28.0
    )
    # the same numbers from a GPU run do cap the predicted speed-ups
    on_gpu = make_plan(w, evidence=[replace(cpu_run, device="cuda")])
    assert "GPU idles 28 %" in " ".join(t.reason for t in on_gpu.techniques)
    assert not any("CPU-only run" in n for n in on_gpu.notes)
    assert {f.id: f for f in on_gpu.diagnosis.findings}["input_bound"].confidence == "high"


@pytest.mark.slow
def test_profile_evidence_of_a_real_cpu_run(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SLOW_LOADER_SCRIPT)
    run = cli(
        "profile",
        "--steps",
        "8",
        "-w",
        "1",
        "--stop",
        "--no-save",
        "--json",
        "--",
        sys.executable,
        str(script),
    )
    assert run.exit_code == 0, run.stderr[-800:]
    doc = tmp_path / "run.json"
    doc.write_text(run.stdout)
    result = cli(
        "plan", "vit-b-16", "-t", "cv-train", "-g", "a10", "-b", "32", "--evidence", str(doc), "--json"
    )
    assert result.exit_code == 0, result.stderr
    plan = result.json()["plan"]
    findings = {f["id"]: f for f in plan["diagnosis"]["findings"]}
    # a CPU run's loader holds for the a10 only at medium confidence, and never as "the GPU idles"
    assert (
        findings["input_bound"]["source"] == "profile" and findings["input_bound"]["confidence"] == "medium"
    )
    assert "fix: input_bound" in plan["config"]["snippets"]
    assert "GPU idles" not in result.stdout and any("CPU-only run" in n for n in plan["notes"])


@pytest.mark.slow
def test_traced_vram_for_the_current_configuration():
    w = workload_from_mapping(
        {"model": "qwen2.5-0.5b", "task": "lora", "gpu": "t4", "batch_size": 2, "seq_len": 512}
    )
    p = make_plan(w, traced=True)
    traced, analytic = p.memory.current, Evaluator().memory_dict(w)
    assert p.memory.method == "traced" and traced["method"] == "traced" and traced["simulation_wall_s"] > 0
    assert traced["breakdown_bytes"] and traced["device_total_bytes"] > traced["peak_allocated_bytes"] > 0
    assert (
        abs(traced["device_total_bytes"] / analytic["device_total_bytes"] - 1) < 0.35
    )  # two independent methods
    assert any("traced simulation" in n for n in p.notes)


def test_conv_nets_plan(cli):  # the full checks are in tests/vision/test_vision_plan.py
    result = cli("plan", "resnet-50", "-t", "cv-train", "-g", "a10")
    assert result.exit_code == 0 and "images/s" in result.stdout


def test_plan_never_imports_torch():
    code = (
        "import sys\nfrom gpuwise.cli.app import main\ntry:\n    main(['plan', "
        "'examples/pretrain-8xh100.yaml', '--json'])\n"
        "except SystemExit:\n    pass\nsys.stderr.write('TORCH=%s' % ('torch' in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert "TORCH=False" in proc.stderr, proc.stderr[-500:]


def test_plan_keeps_the_global_batch_and_prunes_edits_the_final_layout_does_not_need():
    """70B pretraining on 64 H100 at micro-batch 2: activation checkpointing stays only if the final
    layout needs it to fit (when the scaling layout fits without it, it is pruned with a note), and the
    larger micro-batch (a bigger global batch) is an option, never part of the config."""
    p = plan_for(model="llama-3-70b", task="pretrain", gpu="h100-sxm", num_gpus=64, batch_size=2)
    final = p.config.workload
    assert final.global_batch == p.workload.global_batch
    if estimate_memory(replace(final, grad_checkpointing="none")).fits:
        assert final.grad_checkpointing == "none"
        assert any(n.startswith("Pruned 'Checkpoint every layer") for n in p.notes)
    else:  # FSDP on 64 GPUs (multi-rail rings hide its gathers): 160 GiB per GPU without checkpointing
        assert final.grad_checkpointing != "none"
    assert all(t.quality_risk != "changes-training" for t in p.recommended)
    bigger = [t for t in p.techniques if t.id.startswith("bigger_batch")]
    assert all(t.verdict != "recommended" for t in bigger)
    # MFU is quoted against the BF16 peak: the recommended config's figure is a plausible share of it
    assert p.config.outcome.mfu_pct is not None and 20 < p.config.outcome.mfu_pct < 60


def test_a_tensor_parallel_lora_plan_gives_no_trainer_snippet_and_no_pretraining_tool():
    """The Hugging Face Trainer never splits a layer across GPUs: for a TP plan its snippet would load
    the whole model per rank and OOM again, and torchtitan has no LoRA; the torch snippets still parse."""
    import ast

    p = plan_for(
        model="llama-3-70b", task="lora", gpu="a100-80gb-sxm", num_gpus=4, tp=2, batch_size=1, seq_len=4096
    )
    assert p.config.workload.tp == 2
    assert "Hugging Face Trainer + PEFT" not in p.config.snippets
    assert (
        "PyTorch FSDP2" in p.config.snippets
        and "parallelize_module(block" in p.config.snippets["PyTorch FSDP2"]
    )
    assert "torchtitan" not in {t.id for t in p.tools}
    for label in ("PyTorch loop", "PyTorch FSDP2"):
        ast.parse(p.config.snippets[label])


def test_small_batch_needs_the_model_to_predict_a_gain_from_a_larger_batch():
    """ResNet-50 at 256 images per A100 is compute-bound: 4x the batch predicts ~1.0x, so a stated 40 %
    utilization with free memory is not blamed on the batch (issue 28), and the idle cause says why."""
    p = plan_for(model="resnet-50", task="cv-train", gpu="a100-80gb-sxm", num_gpus=8, batch_size=256,
                 utilization_pct=40)  # fmt: skip
    assert "small_batch" not in {f.id for f in p.diagnosis.findings}
    cause = next(c for c in p.diagnosis.idle_causes if c.id == "small_batch")
    assert cause.status == "ruled-out" and "predicts" in cause.detail
    small = plan_for(model="llama-3.2-1b", task="full-finetune", gpu="h100-sxm", batch_size=1, seq_len=512,
                     utilization_pct=40)  # fmt: skip
    ev = next(e for e in small.evidence if e.source == "prediction")
    assert ev.model.larger_batch_speedup_x is not None and ev.model.larger_batch_speedup_x > 1.05
    assert "small_batch" in {f.id for f in small.diagnosis.findings}
