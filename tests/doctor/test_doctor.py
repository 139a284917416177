"""`gpuwise doctor`: the fixes come from the findings, and the whole loop runs on this machine."""

from __future__ import annotations

import re

import pytest

from conftest import run_cli
from gpuwise.diagnose import Evidence, diagnose
from gpuwise.doctor.run import run_doctor
from gpuwise.doctor.sizing import LOAD_TO_COMPUTE, size_workload
from gpuwise.doctor.workload import ReferenceImages, WorkloadSettings
from gpuwise.tune.candidates import from_findings


def findings_for(**fields):
    return diagnose(Evidence.flat(source="profile", **fields))


def test_input_bound_fix_takes_its_numbers_from_the_finding():
    findings = findings_for(
        step_time_s=0.1, phase_s={"data_wait": 0.06}, loader_num_workers=0, cpu_count=6, cpu_util_pct=30
    )
    first = from_findings(findings, None, on_gpu=False, allow_numerics=False)[0]
    assert first.knobs == {"num_workers": 5, "persistent_workers": True, "prefetch_factor": 4}  # 6 cores
    assert first.finding_id == "input_bound"  # no pin_memory: without a GPU nothing to pin for


def test_an_io_bound_loader_also_gets_more_workers_than_cores():
    ev = Evidence.flat(
        source="profile", step_time_s=0.1, phase_s={"data_wait": 0.06}, loader_num_workers=0, cpu_count=2,
        cpu_util_pct=20, loader_wait_cpu_pct=10,
    )  # fmt: skip
    workers = [
        c.knobs["num_workers"] for c in from_findings(diagnose(ev), ev, on_gpu=False, allow_numerics=False)
    ]
    assert workers == [2, 4]


def test_on_a_gpu_the_loader_fix_also_pins_and_cudnn_picks_its_algorithms():
    findings = findings_for(
        step_time_s=0.1, phase_s={"data_wait": 0.06}, loader_num_workers=0, cpu_count=2, cpu_util_pct=30
    )
    found = from_findings(findings, None, on_gpu=True, allow_numerics=False)
    assert found[0].knobs["num_workers"] == 2 and found[0].knobs["pin_memory"] is True
    assert {"cudnn_benchmark": True} in [c.knobs for c in found]


def test_pageable_copies_on_a_gpu_get_pinned_memory():
    findings = findings_for(pageable_copy_pct=100, h2d_copy_pct=20)
    first = from_findings(findings, None, on_gpu=True, allow_numerics=False)[0]
    assert first.knobs == {"pin_memory": True} and first.finding_id == "pageable_copies"
    assert from_findings(findings, None, on_gpu=False, allow_numerics=False) == []


def test_saturated_cpu_gets_no_more_workers():
    findings = findings_for(input_wait_pct=40, loader_num_workers=2, cpu_count=2, cpu_util_pct=97)
    assert from_findings(findings, None, on_gpu=False, allow_numerics=False) == []


def test_mixed_precision_only_on_a_gpu_and_autocast_only_when_allowed():
    findings = findings_for(fp32_matmul_pct=100, amp_enabled=False, tensor_core_speedup=15.8)
    assert findings[0].id == "no_mixed_precision"
    safe = [c.knobs for c in from_findings(findings, None, on_gpu=True, allow_numerics=False)]
    assert {"tf32": True} in safe and not any("autocast" in k for k in safe)
    opted = [c.knobs for c in from_findings(findings, None, on_gpu=True, allow_numerics=True)]
    assert {"autocast": "bf16", "tf32": True} in opted
    assert from_findings(findings, None, on_gpu=False, allow_numerics=True) == []


def test_reference_samples_are_deterministic_and_really_decoded():
    data = ReferenceImages(8, storage_latency_s=0.0, seed=3)
    x1, y1 = data[5]
    x2, _y2 = data[5]
    assert x1.shape == (3, 64, 64) and y1 == 5 and (x1 == x2).all()
    assert not (data[6][0] == x1).all()  # another image, another crop
    assert abs(float(x1.mean())) < 3  # normalized pixels


@pytest.fixture(scope="module")
def doctor_cli(tmp_path_factory):
    """One ``gpuwise doctor --json`` run and the run store it wrote, shared by the tests that read it: the
    tuner's trials are a minute of profiled training processes, the same loop whichever test asks."""
    store = tmp_path_factory.mktemp("doctor") / "runs.sqlite"
    # the minimum --steps: the fixes gain 2-4x here, far beyond the trials' spread at 8 steps or 10
    result = run_cli("doctor", "--json", "--steps", "8", "--warmup", "1", "--store", str(store), timeout=300)
    return result, store


@pytest.mark.slow
def test_doctor_is_tune_on_the_reference_workload(doctor_cli):
    result, _store = doctor_cli
    assert result.exit_code == 0, result.stderr[-2000:]
    doc = result.json()
    assert doc["findings"][0]["id"] == "input_bound"
    trials = doc["trials"]
    assert trials and trials[0]["role"] == "baseline"
    assert "gpuwise.doctor.script" in trials[0]["command"]  # a fresh process, like a user's script
    tried = [t["knobs"].get("num_workers") for t in trials[1:]]
    assert doc["settings_after"]["num_workers"] in tried  # the winner of the tuner's trials
    assert (
        doc["after"]["loader"]["num_workers"] == doc["settings_after"]["num_workers"]
    )  # seen by the profiler
    assert doc["after"]["loader"]["persistent_workers"] is True
    assert (
        doc["before"]["run_id"]
        and doc["after"]["run_id"]
        and doc["after"]["run_id"] > doc["before"]["run_id"]
    )
    # the tuner's progress events reach the CLI's callback: trial 1 started, then its status line
    assert re.search(r"trial 1/\d+ baseline: .*\n\s+ok ", result.stderr), result.stderr[-2000:]
    assert doc["before_steps_per_s"] > 0 and doc["after_steps_per_s"] > doc["before_steps_per_s"]
    assert doc["applied_fixes"][0]["finding_id"] == "input_bound"


def test_the_workload_is_sized_so_loading_takes_four_times_the_compute_here():
    """The storage latency is whatever brings a batch's loading time to LOAD_TO_COMPUTE x its compute time,
    as timed on this machine now (so the fix's gain does not depend on the machine's speed or load)."""
    settings = WorkloadSettings(batch_size=16)
    sizing = size_workload(settings, "cpu")
    assert sizing.compute_s > 0 and sizing.decode_s > 0 and sizing.storage_latency_s >= 0
    loading_s = sizing.decode_s + sizing.storage_latency_s * settings.batch_size
    assert loading_s == pytest.approx(max(sizing.decode_s, LOAD_TO_COMPUTE * sizing.compute_s))


def test_doctor_rejects_too_few_steps():
    from gpuwise.errors import GpuwiseError

    with pytest.raises(GpuwiseError, match="at least 8"):
        run_doctor(steps=3)


@pytest.mark.slow
def test_doctor_cli_json(doctor_cli):
    result, store = doctor_cli
    assert result.exit_code == 0, result.stderr[-2000:]
    doc = result.json()
    assert doc["kind"] == "doctor" and doc["device"] == "cpu"
    assert doc["before_steps_per_s"] > 0 and doc["after_steps_per_s"] > 0
    assert [f["setting"] for f in doc["applied_fixes"]][:1] == ["num_workers"]
    assert doc["findings"][0]["id"] == "input_bound"
    assert doc["evidence"]["source"] == "profile"
    assert "trial 1/" in result.stderr  # progress went to stderr
    assert doc["sizing"]["load_to_compute"] == LOAD_TO_COMPUTE and doc["sizing"]["compute_s_per_batch"] > 0
    assert set(doc["others_cpu_pct"]) == {"before", "after"}
    listed = run_cli("runs", "list", "--json", "--store", str(store)).json()
    labels = [r["label"] for r in listed["runs"]]
    assert labels[0].startswith("doctor: ") and labels[-1] == "doctor #1: as written"
