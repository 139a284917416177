"""`gpuwise tune`'s pure parts: flags of the script, effective batch, knob parsing, loss checks, rendering."""

from __future__ import annotations

import pytest

from conftest import run_cli
from gpuwise.errors import GpuwiseError
from gpuwise.tune.frameworks import render
from gpuwise.tune.knobs import parse_knob_option
from gpuwise.tune.params import flag_value, param_space, parse_param, with_flag
from gpuwise.tune.verify import compare_losses


def test_flags_are_read_and_replaced_in_both_spellings_or_appended():
    argv = ["python", "train.py", "--batch-size", "16", "--lr=0.1"]
    assert flag_value(argv, "--batch-size") == "16" and flag_value(argv, "--lr") == "0.1"
    assert with_flag(argv, "--batch-size", "32")[2:4] == ["--batch-size", "32"]
    assert with_flag(argv, "--lr", "1")[-1] == "--lr=1"
    assert with_flag(argv, "--grad-accum", "2")[-2:] == ["--grad-accum", "2"]
    assert flag_value(argv, "--batch") is None  # a prefix of another flag is not that flag


def test_batch_values_get_the_accumulation_that_keeps_the_effective_batch():
    argv = ["python", "t.py", "--batch-size", "8", "--grad-accum", "4"]
    space = param_space(argv, [parse_param("batch_size=--batch-size:4,8,16,32,48,64")], "--grad-accum")
    assert space.effective_batch == 32
    plans = {p.batch: p for p in space.batch_plans()}
    assert [(b, plans[b].accum) for b in (4, 8, 16, 32)] == [(4, 8), (8, 4), (16, 2), (32, 1)]
    assert plans[48].skipped and "effective batch 32" in plans[48].skipped
    assert plans[64].skipped  # 64 > 32: no whole accumulation keeps it
    assert all(p.batch * p.accum == 32 for p in plans.values() if p.accum)


def test_a_batch_param_needs_the_accumulation_flag_or_an_explicit_none():
    argv = ["python", "t.py", "--batch-size", "8"]
    batch = parse_param("batch_size=--batch-size:8,16")
    with pytest.raises(GpuwiseError, match="effective batch"):
        param_space(argv, [batch], None)
    with pytest.raises(GpuwiseError, match="must give its batch"):
        param_space(["python", "t.py"], [batch], "--grad-accum")
    loose = param_space(argv, [batch], "none")
    assert not loose.keeps_effective_batch and [p.accum for p in loose.batch_plans()] == [None, None]
    assert param_space(argv, [batch], "--grad-accum").notes  # the command gives no --grad-accum: 1


@pytest.mark.parametrize(
    "bad", ["batch_size=--batch-size", "batch_size=--batch-size:", "x=y:1", "batch_size=--bs:8,big"]
)
def test_bad_param_options_are_one_clear_error(bad):
    with pytest.raises(GpuwiseError, match="--param"):
        parse_param(bad)


def test_knob_options_are_typed_and_checked():
    assert parse_knob_option("num_workers=2,4") == ("num_workers", [2, 4])
    assert parse_knob_option("channels-last=true") == ("channels_last", [True])
    assert parse_knob_option("autocast=bf16") == ("autocast", ["bf16"])
    assert parse_knob_option("compile=true,eager") == ("compile", ["inductor", "eager"])
    for bad, message in (
        ("autocast=fp8", "autocast"),
        ("num_worker=2", "did you mean"),
        ("threads", "NAME="),
    ):
        with pytest.raises(GpuwiseError, match=message):
            parse_knob_option(bad)


def test_losses_are_compared_over_the_window_after_warm_up():
    base = [9.0, 5.0, 2.0, 1.5, 1.2, 1.1]
    early = compare_losses(base, [9.9, 5.5, 2.0, 1.5, 1.2, 1.1], rtol=0.01, window=3, warmup=2)
    assert early.accepted and early.first_step == 4 and early.steps == 3  # warm-up differences do not count
    assert early.max_rel_diff == pytest.approx(0.0) and "losses 4-6, after 2 warm-up" in early.reason
    drift = compare_losses(base, [9.0, 5.0, 2.0, 1.5, 1.3, 1.2], rtol=0.01, window=3, warmup=2)
    assert not drift.accepted and "mean" in drift.reason and "vs baseline" in drift.reason
    assert drift.max_rel_diff == pytest.approx((4.0 / 3 - 3.8 / 3) / (3.8 / 3))
    wobble = compare_losses([1.0] * 6, [1.0, 1.0, 1.0, 0.9, 1.1, 1.0], rtol=0.01, window=3, warmup=2)
    assert not wobble.accepted and "spread" in wobble.reason  # same mean, oscillating
    overflow = compare_losses(base, [9.0, float("inf"), 2.0, 1.5, 1.2, 1.1], rtol=0.5, window=3, warmup=2)
    assert not overflow.accepted and "loss 2 is inf" in overflow.reason  # even inside the warm-up
    short = compare_losses(base[:2], [9.0, 5.0], rtol=0.01, window=3, warmup=2)
    assert short.accepted and short.first_step == 1  # shorter than the warm-up: the last losses captured
    assert not compare_losses(base, [], rtol=0.5, window=3).accepted  # nothing to compare: not accepted


def test_the_winner_is_printed_in_each_frameworks_terms():
    knobs = {"num_workers": 4, "persistent_workers": True, "autocast": "bf16", "tf32": True}
    hf = render("hf-trainer", knobs, 16, 2)
    assert "dataloader_num_workers=4" in hf and "bf16=True" in hf and "gradient_accumulation_steps=2" in hf
    assert "per_device_train_batch_size=16" in hf and "tf32=True" in hf
    lightning = render("lightning", knobs, 16, 2)
    assert "precision='bf16-mixed'" in lightning and "accumulate_grad_batches=2" in lightning
    assert "DataLoader(..., num_workers=4, persistent_workers=True, batch_size=16)" in lightning
    plain = render(None, knobs, None, None)
    assert plain.startswith("DataLoader(..., num_workers=4") and "torch.autocast" in plain
    assert "allow_tf32 = True" in plain
    assert "no gradient accumulation" in render(None, {}, 32, 1)  # not "over 1 micro-batches"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target-gpu", "l4", "--", "python", "x.py"], "go together"),
        (["--knob", "num_workers=many", "--", "python", "x.py"], "not a whole number"),
        (["--param", "batch_size=--bs:8", "--", "python", "x.py", "--bs", "8"], "effective batch"),
        (["--no-save"], "give the command"),
        (["--no-save", "--", "missing_script.py"], "does not exist"),
        (["--frobnicate", "--", "python", "x.py"], "no option --frobnicate"),
    ],
)
def test_bad_tune_input_is_one_line_and_exit_2(args, message):
    result = run_cli("tune", *args)
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_an_unseeded_script_is_told_its_losses_cannot_verify_a_numerics_knob():
    from gpuwise.tune.params import ParamSpace
    from gpuwise.tune.result import Config
    from gpuwise.tune.search import TuneOptions, _determinism_note, _Session
    from gpuwise.tune.trial import Trial, TrialSpec

    session = _Session(["python", "t.py"], TuneOptions(), ParamSpace(), None)
    runs = [[2.0, 1.5, 1.2], [2.0, 1.5, 1.2], [2.3, 1.9, 1.4]]
    trials = [Trial(TrialSpec(i, "baseline", ["python", "t.py"]), "ok", losses=r) for i, r in enumerate(runs)]
    _determinism_note(session, Config("k", "as written", trials[:2]))
    assert session.notes == []  # reproduced: the check means something
    _determinism_note(session, Config("k", "as written", [trials[0], trials[2]]))
    assert "differ between two runs as written" in session.notes[0] and "seed it" in session.notes[0]


BOOT_PROBE = """
import json, os, sys
os.environ["GPUWISE_TUNE"] = json.dumps({"out_dir": sys.argv[1], "knobs": {"threads": 2, "num_workers": 2}})
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset
from gpuwise.profile import knobs_boot as boot

boot.apply()
torch.set_num_threads(1)  # the script's own call: the knob holds


class Threads(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.get_num_threads()


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(4))


mapped = DataLoader(Threads(), batch_size=1)
stream = DataLoader(Stream(), batch_size=1)
print(json.dumps({
    "main_threads": torch.get_num_threads(),
    "mapped_workers": mapped.num_workers,
    "worker_threads": sorted({int(x) for x in mapped}),
    "stream_workers": stream.num_workers,
    "stream": [int(x) for x in stream],
    "report": boot._report,
}))
"""


def test_the_boot_hook_applies_knobs_where_they_are_safe(tmp_path):
    """In a process of its own (the hook patches torch): threads hold against the script's call but not
    in DataLoader workers (which set 1); an IterableDataset keeps its workers (N would repeat each sample)."""
    import json
    import subprocess
    import sys

    probe = tmp_path / "probe.py"
    probe.write_text(BOOT_PROBE)
    out = subprocess.run(
        [sys.executable, str(probe), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["main_threads"] == 2 and doc["mapped_workers"] == 2 and doc["worker_threads"] == [1]
    assert doc["stream_workers"] == 0 and doc["stream"] == [0, 1, 2, 3]
    assert doc["report"] == {"loaders": 1, "iterable_skipped": 1, "threads_kept": 1}


def test_findings_the_tuner_cannot_apply_are_kept_as_notes():
    from types import SimpleNamespace

    from gpuwise.diagnose import Finding as DiagnoseFinding
    from gpuwise.tune.search import _untried_findings

    def finding(id_, severity):
        return DiagnoseFinding(
            id_, "t", severity, "high", "input", "s", {}, "prefetch on a thread", source="profile"
        )

    session = SimpleNamespace(notes=[])
    found = [finding("unexplained_host_time", "high"), finding("input_bound", "high")]
    found.append(finding("sync_bound", "low"))
    _untried_findings(session, found, tried={"input_bound"})
    assert session.notes == [
        "not tried, needs a change to the script: unexplained_host_time (t): prefetch on a thread"
    ]


def test_the_retired_repeat_best_option_is_accepted_and_said_to_be_unused():
    # every configuration that could still win is repeated now; a script that still passes the old option
    # keeps working and is told the option no longer does anything (it was silently ignored before)
    result = run_cli("tune", "--repeat-best", "2", "--no-save", "--", "missing_script.py")
    assert result.exit_code == 2, result.stderr
    assert "--repeat-best is no longer used" in result.stderr and "does not exist" in result.stderr
    assert "--repeat-best" not in run_cli("tune", "--help").stdout
