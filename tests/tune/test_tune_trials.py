"""`gpuwise tune` on real CPU trials: each a fresh profiled process of a small script from tune_scripts.py."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from test_profile_framework import HF_TRAINER

from conftest import BUSY_FACTOR, REPO, run_cli
from gpuwise.diagnose import thresholds as T
from gpuwise.tune.knobs import parse_knob_option
from gpuwise.tune.params import parse_param
from gpuwise.tune.search import TuneOptions, run_tune
from gpuwise.tune.trial import KILL_GRACE_S
from tune_scripts import FLEX, NUMERIC, STARVED, write


def test_a_starved_loader_comes_out_at_least_twice_as_fast_with_its_own_fixes(tmp_path):
    script = STARVED
    result = run_tune([sys.executable, str(script)], TuneOptions(steps=15, warmup=3, repeats=1))
    baseline = result.trials[0]
    assert baseline.status == "ok" and baseline.run is not None
    assert baseline.run.findings[0].id == "input_bound"
    w = result.winner
    assert w is not None and w.speedup_x >= 2.0, result.to_dict()["configs"]
    assert w.config.trials[0].spec.knobs["num_workers"] >= 2
    assert len(w.config.trials) >= T.TUNE_MIN_WINNER_TRIALS <= len(result.baseline.trials)  # interleaved
    assert w.beats_spread
    measured = w.config.trials[0].run
    assert (
        measured is not None
        and measured.summary.loader.num_workers == w.config.trials[0].spec.knobs["num_workers"]
    )
    assert "DataLoader(..., num_workers=" in w.code and w.command.endswith("starved_loader.py")
    doc = result.to_dict()
    assert doc["metric"] == "samples_per_s" and doc["winner"]["speedup_x"] >= 2.0
    from gpuwise.report import html, markdown
    from gpuwise.report.tune_view import tune_document

    report = tune_document(result)  # one document, every format
    assert "faster" in markdown.render(report) and "DataLoader(..., num_workers=" in markdown.render(report)
    assert "<script" not in html.render(report, charts=False) and "Trials" in html.render(
        report, charts=False
    )


def test_a_knob_that_moves_the_losses_beyond_the_tolerance_is_rejected_with_the_numbers(tmp_path):
    script = write(tmp_path, "numeric.py", NUMERIC)
    options = TuneOptions(
        steps=8,
        warmup=2,
        repeats=0,
        knobs=[
            parse_knob_option("autocast=bf16"),
            parse_knob_option("channels_last=true"),
            parse_knob_option("compile=eager"),  # dynamo's tracing, without a C++ compiler's minutes
        ],
        loss_rtol=1e-6,  # the window means: bf16 1.3e-5 apart, channels_last 1.2e-8 (measured on this script)
    )
    result = run_tune([sys.executable, str(script)], options)
    by_label = {t.spec.label: t for t in result.trials}
    base = by_label["as written"]
    assert len(base.losses) == options.warmup + options.steps  # the whole trial; the window is after warm-up
    bf16 = by_label["autocast=bf16"]
    assert bf16.status == "rejected" and "vs baseline" in (bf16.error or "")
    assert len(bf16.losses) == len(base.losses) and bf16.losses != base.losses
    layout = by_label["channels_last=True"]  # same arithmetic, another memory layout: within 1e-6
    assert layout.status == "ok", layout.error
    assert any("losses within" in n for n in layout.notes)
    compiled = by_label["compile=eager"]
    assert compiled.status == "ok" and compiled.losses == base.losses  # the same graph, traced
    verdicts = {c.label: c.verdict for c in result.configs}
    assert verdicts["autocast=bf16"] == "rejected"
    assert result.winner is None or result.winner.config.label != "autocast=bf16"


def startup_s() -> float:
    """Wall seconds a fresh interpreter takes to import torch here, now (~1.5 s quiet, 10+ s busy)."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True, timeout=600)
    return time.monotonic() - t0


def test_failed_trials_are_recorded_and_the_batch_search_keeps_the_effective_batch(tmp_path):
    script = write(tmp_path, "flex.py", FLEX)
    # a budget the hanging trial spends in full, so kept short; but 8 steps of a good trial must fit in
    # it whatever the machine's load, so it is a multiple of the start-up measured now
    budget_s = max(12.0, 4 * startup_s())
    options = TuneOptions(
        steps=6,
        warmup=2,
        repeats=0,
        budget_s=budget_s,
        params=[
            parse_param("batch_size=--batch-size:4,8,16,32,48,64"),
            parse_param("mode=--mode:crash,oom,hang"),
        ],
        accum="--grad-accum",
    )
    argv = [sys.executable, str(script), "--batch-size", "8", "--grad-accum", "4"]
    result = run_tune(argv, options)
    status = {t.spec.label: t.status for t in result.trials}
    assert status["as written"] == "ok"
    assert status["batch_size=4, accum=8"] == "ok" and status["batch_size=16, accum=2"] == "ok"
    assert status["batch_size=32, accum=1"] == "oom"  # above --max-batch 16
    assert status["batch_size=48"] == "skipped" and status["batch_size=64"] == "skipped"
    assert status["mode=crash"] == "crashed" and status["mode=oom"] == "oom" and status["mode=hang"] == "hung"
    crashed = next(t for t in result.trials if t.spec.label == "mode=crash")
    assert "the script's own bug" in (crashed.error or "")
    for t in result.trials:
        if t.spec.role == "batch" and t.status == "ok":
            assert t.spec.batch * t.spec.accum == 32
            loader = t.run.summary.loader  # what the profiler saw the script do
            assert loader.batch_size == t.spec.batch
            assert round(loader.batches / t.run.summary.total_steps) == t.spec.accum
    assert result.effective_batch == 32
    baseline = next(t for t in result.trials if t.spec.role == "baseline")
    # the command's own batch x accumulation, so the as-written row is comparable in samples/s
    assert baseline.samples_per_step == 32 and baseline.samples_per_s == baseline.steps_per_s * 32
    assert result.largest_batch == 16  # measured: 32 ran out of memory
    hung = next(t for t in result.trials if t.spec.label == "mode=hang")
    assert budget_s <= hung.wall_s < 2 * budget_s + KILL_GRACE_S  # killed at the budget


def test_a_command_that_runs_out_of_memory_still_gets_its_batch_search(tmp_path):
    script = write(tmp_path, "flex.py", FLEX)
    options = TuneOptions(
        steps=6,
        warmup=2,
        repeats=0,
        auto=False,
        params=[parse_param("batch_size=--batch-size:8,16,24")],
        accum="none",
    )
    result = run_tune([sys.executable, str(script), "--batch-size", "32"], options)
    status = {t.spec.label: t.status for t in result.trials}
    assert status == {
        "as written": "oom",
        "batch_size=8": "ok",
        "batch_size=16": "ok",
        "batch_size=24": "oom",
    }
    assert result.largest_batch == 16 and result.winner is None
    assert "only the batch search runs" in " ".join(result.notes)


def test_the_mnist_look_alike_is_tuned_through_its_own_batch_flag(tmp_path):
    script = REPO / "benchmarks" / "real_scripts" / "mnist_like.py"
    options = TuneOptions(
        steps=6,
        warmup=2,
        repeats=0,
        auto=False,
        # 32 only: 64 is the script's default, which the baseline already measures (the command does not
        # state it, so a 64 in the list would be run again for nothing)
        params=[parse_param("batch_size=--batch-size:32")],
        accum="none",
    )
    result = run_tune([sys.executable, str(script), "--epochs", "1", "--read-ms", "0"], options)
    trials = {t.spec.label: t for t in result.trials}
    assert trials["as written"].status == "ok" and trials["as written"].run.summary.loader.batch_size == 64
    assert len(result.trials) == 2  # the flag was not on the command: the trial adds it
    for batch in (32,):
        trial = trials[f"batch_size={batch}"]
        assert trial.status == "ok" and trial.run.summary.loader.batch_size == batch
        assert trial.samples_per_s == trial.steps_per_s * batch
    assert result.effective_batch is None  # --accum none: the effective batch was allowed to change


def test_ctrl_c_stops_the_tuner_and_keeps_the_trials_done(tmp_path):
    script = STARVED
    store = tmp_path / "runs.sqlite"
    cmd = [sys.executable, "-m", "gpuwise", "tune", "--json", "--store", str(store), "--repeats", "0"]
    # 150 steps: the baseline ends (and trial 2 starts) in seconds, while trial 2 still runs when Ctrl-C
    # comes 1.5 s after its start line: its 153 batches of 16 samples sleep 2 ms each (4.9 s) besides
    # its start-up, and a loaded machine only makes it longer
    cmd += ["--steps", "150", "--knob", "threads=1,2", "--", sys.executable, str(script)]
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 90 * BUSY_FACTOR  # only a guard: the first trial's end is awaited
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if not line or line.startswith("trial 2/"):  # not line: the tuner ended (the assert below says how)
            break
    time.sleep(1.5)  # the second trial is running
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60 * BUSY_FACTOR)
    assert proc.returncode == 130, "".join(seen) + err
    doc = json.loads(out)
    assert doc["kind"] == "tune" and doc["interrupted"] is True
    assert doc["trials"][0]["status"] == "ok" and doc["trials"][1]["status"] == "interrupted"
    assert len(doc["trials"]) == 2  # nothing ran after Ctrl-C
    with sqlite3.connect(store) as conn:
        kinds = [row[0] for row in conn.execute("SELECT kind FROM runs ORDER BY id")]
    assert kinds[-1] == "tune" and "tune-trial" in kinds
    shown = run_cli("runs", "show", "last", "--json", "--store", str(store))  # the session, as saved
    assert shown.exit_code == 0 and shown.json()["kind"] == "tune" and shown.json()["interrupted"] is True
    trial = run_cli("runs", "show", "-2", "--json", "--store", str(store))  # a trial: a profiled run
    assert trial.exit_code == 0 and trial.json()["label"].startswith("tune #")


@pytest.mark.slow
def test_a_hf_trainer_script_gets_its_winner_as_training_arguments(tmp_path):
    """The Trainer builds its DataLoader itself: the boot hook's rewrite reaches it all the same, and the
    winner comes back in TrainingArguments' terms."""
    script = write(tmp_path, "hf_train.py", HF_TRAINER.replace("max_steps=24", "max_steps=400"))
    options = TuneOptions(steps=8, warmup=2, repeats=0, max_trials=2)
    result = run_tune([sys.executable, str(script), str(tmp_path / "out")], options)
    assert [t.status for t in result.trials] == ["ok", "ok"], [t.error for t in result.trials]
    assert result.framework == "hf-trainer"
    tried = result.trials[1]
    assert tried.run.summary.loader.num_workers == tried.spec.knobs["num_workers"] >= 2
    # one trial each (no repeats) cannot make a certain winner; the candidate's settings still render
    # in TrainingArguments' terms
    assert result.winner is None
    from gpuwise.tune.frameworks import render

    code = render(result.framework, tried.spec.knobs, None, None)
    assert code.startswith("TrainingArguments(..., dataloader_num_workers=")


LLAMA_LIKE = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}


def test_without_that_gpu_the_target_gpus_batches_are_simulated_and_labelled_so(tmp_path):
    """On this CPU machine a trial never runs out of GPU memory: the batches an L4 (24 GB) holds with 10 %
    free come from the traced simulator (a 4096-token step of a 32k-vocabulary model: ~3.4 GB per
    sample, logits included), and the larger batches are not run."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_LIKE))
    spec = tmp_path / "model.yaml"
    spec.write_text(f"model: {tmp_path / 'config.json'}\ntask: pretrain\nseq_len: 4096\nprecision: fp32\n")
    script = write(tmp_path, "flex.py", FLEX)
    result = run_cli(
        "tune", "--json", "--no-save", "--repeats", "0", "--no-auto", "--steps", "6", "--warmup", "2",
        "--target-gpu", "l4", "--workload", str(spec),
        "--param", "batch_size=--batch-size:2,4,8,16", "--accum=--grad-accum",
        "--", sys.executable, str(script), "--batch-size", "2", "--grad-accum", "8", "--max-batch", "64",
        timeout=240,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr[-2000:]
    doc = result.json()
    rows = {r["batch"]: r for r in doc["simulated_batches"]}
    assert [rows[b]["kept"] for b in (2, 4, 8)] == [True, True, False] and 16 not in rows
    assert all(r["method"] == "simulated" for r in rows.values()) and doc["simulated_max_batch"] == 4
    status = {t["label"]: (t["status"], t["error"]) for t in doc["trials"]}
    assert status["batch_size=4, accum=4"][0] == "ok"
    for big in ("batch_size=8, accum=2", "batch_size=16, accum=1"):
        assert status[big][0] == "skipped" and "l4 free (simulated)" in status[big][1]
