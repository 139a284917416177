"""`gpuwise doctor`: the fixes come from the findings, and the whole loop runs on this machine."""

from __future__ import annotations

from unittest import mock

import pytest

from conftest import run_cli
from gpuwise.diagnose import Evidence, diagnose
from gpuwise.profile.doctor.fixes import plan_fixes
from gpuwise.profile.doctor.run import run_doctor
from gpuwise.profile.doctor.sizing import LOAD_TO_COMPUTE, size_workload
from gpuwise.profile.doctor.workload import ReferenceImages, WorkloadSettings


def findings_for(**fields):
    return diagnose(Evidence(source="profile", **fields))


def test_input_bound_fix_takes_its_numbers_from_the_finding():
    findings = findings_for(
        step_time_s=0.1, phase_s={"data_wait": 0.06}, loader_num_workers=0, cpu_count=6, cpu_util_pct=30
    )
    settings, applied, manual = plan_fixes(findings, WorkloadSettings(), "cpu")
    assert settings.num_workers == 5  # the rule's suggestion for 6 cores
    assert settings.prefetch_factor == 4 and settings.persistent_workers is True
    assert settings.pin_memory is False  # no GPU: nothing to pin for
    assert {f.setting for f in applied} == {"num_workers", "prefetch_factor", "persistent_workers"}
    assert all(f.finding_id == "input_bound" for f in applied)
    assert any("pin_memory" in m["why"] for m in manual)


def test_on_a_gpu_the_loader_fix_also_pins_and_copies_asynchronously():
    findings = findings_for(
        step_time_s=0.1, phase_s={"data_wait": 0.06}, loader_num_workers=0, cpu_count=2, cpu_util_pct=30
    )
    settings, _applied, _ = plan_fixes(findings, WorkloadSettings(), "cuda")
    assert settings.num_workers == 2 and settings.pin_memory and settings.non_blocking


def test_saturated_cpu_gets_no_more_workers():
    findings = findings_for(input_wait_pct=40, loader_num_workers=2, cpu_count=2, cpu_util_pct=97)
    settings, applied, manual = plan_fixes(findings, WorkloadSettings(num_workers=2), "cpu")
    assert applied == [] and settings.num_workers == 2
    assert {m["finding_id"] for m in manual} >= {"input_bound", "loader_cpu_saturated"}


def test_mixed_precision_fix_only_on_a_gpu_with_bf16():
    findings = findings_for(fp32_matmul_pct=100, amp_enabled=False, tensor_core_speedup=15.8)
    assert findings[0].id == "no_mixed_precision"
    with mock.patch("torch.cuda.is_bf16_supported", return_value=True):
        settings, _applied, _ = plan_fixes(findings, WorkloadSettings(), "cuda")
    assert settings.amp_dtype == "bfloat16" and settings.tf32
    cpu_settings, cpu_applied, _cpu_manual = plan_fixes(findings, WorkloadSettings(), "cpu")
    assert cpu_applied == [] and cpu_settings == WorkloadSettings()


def test_reference_samples_are_deterministic_and_really_decoded():
    data = ReferenceImages(8, storage_latency_s=0.0, seed=3)
    x1, y1 = data[5]
    x2, _y2 = data[5]
    assert x1.shape == (3, 64, 64) and y1 == 5 and (x1 == x2).all()
    assert not (data[6][0] == x1).all()  # another image, another crop
    assert abs(float(x1.mean())) < 3  # normalized pixels


def test_doctor_profiles_fixes_and_reruns(tmp_path):
    quick = WorkloadSettings(batch_size=16, storage_latency_s=0.002)
    stages = []
    result = run_doctor(
        steps=8,
        warmup=1,
        device="cpu",
        store=tmp_path / "runs.sqlite",
        settings=quick,
        progress=lambda stage, done, total: stages.append((stage, done, total)),
    )
    assert result.before.findings[0].id == "input_bound"
    from gpuwise.profile.telemetry import usable_cpus

    assert result.settings_after.num_workers == max(
        2, min(8, usable_cpus() - 1)
    )  # the input_bound rule's suggestion
    assert result.after.summary.loader.num_workers == result.settings_after.num_workers
    assert result.after.summary.loader.persistent_workers is True
    assert result.before.run_id and result.after.run_id == result.before.run_id + 1
    assert ("before", 9, 9) in stages and ("after", 9, 9) in stages
    doc = result.to_dict()
    assert doc["before_steps_per_s"] > 0 and doc["after_steps_per_s"] > 0
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
def test_doctor_cli_json(tmp_path):
    result = run_cli(
        "doctor",
        "--json",
        "--steps",
        "10",
        "--warmup",
        "1",
        "--store",
        str(tmp_path / "runs.sqlite"),
        timeout=300,
    )
    assert result.exit_code == 0, result.stderr[-2000:]
    doc = result.json()
    assert doc["kind"] == "doctor" and doc["device"] == "cpu"
    assert doc["before_steps_per_s"] > 0 and doc["after_steps_per_s"] > 0
    assert [f["setting"] for f in doc["applied_fixes"]][:1] == ["num_workers"]
    assert doc["findings"][0]["id"] == "input_bound"
    assert doc["evidence"]["source"] == "profile"
    assert "1/2" in result.stderr  # progress went to stderr
    assert doc["sizing"]["load_to_compute"] == LOAD_TO_COMPUTE and doc["sizing"]["compute_s_per_batch"] > 0
    assert set(doc["others_cpu_pct"]) == {"before", "after"}
    listed = run_cli("runs", "list", "--json", "--store", str(tmp_path / "runs.sqlite")).json()
    assert [r["label"] for r in listed["runs"]] == ["doctor: after", "doctor: before"]
