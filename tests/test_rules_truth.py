"""Issue 11 (items 7-10): each fix fits the machine that was measured, and its gain stays within it.

Rules on recorded Evidence with exact numbers; `test_real_*` runs real CPU PyTorch scripts under
`python -m gpuwise profile`, one of them while another process burns the CPU.
"""

from __future__ import annotations

import pytest

from gpuwise.diagnose import Evidence, diagnose


def found(ev: Evidence) -> dict:
    return {f.id: f for f in diagnose(ev)}


# --- item 7: wrong fixes ---------------------------------------------------------------------------


def test_workers_at_core_count_waiting_on_io_is_not_saturated():
    """2 workers on 2 cores at 28 % CPU: the loader sleeps on I/O; more workers do help."""
    ev = Evidence(
        source="profile", device="cuda", input_wait_pct=40, loader_num_workers=2, cpu_count=2, cpu_util_pct=28
    )
    out = found(ev)
    assert "loader_cpu_saturated" not in out
    assert "waits on I/O" in out["input_bound"].fix
    assert out["input_bound"].metrics["suggested_num_workers"] == 2


def test_worker_count_without_measured_cpu_never_claims_saturation():
    ev = Evidence(source="profile", input_wait_pct=40, loader_num_workers=4, cpu_count=2)
    assert "loader_cpu_saturated" not in found(ev)


def test_cpu_bound_loader_on_two_cores_gets_only_the_idle_core_and_a_bounded_gain():
    """The issue's 0.90x run: a CPU-heavy transform on 2 cores, num_workers=0, CPU 60 % busy.
    One spare core -> one worker; the gain cannot exceed 1/0.6 = 1.67x (not 1.97-2.94x)."""
    ev = Evidence(
        source="profile", device="cpu", input_wait_pct=49, loader_num_workers=0, cpu_count=2, cpu_util_pct=60
    )
    f = found(ev)["input_bound"]
    assert f.metrics["suggested_num_workers"] == 1
    assert f.gain.high == pytest.approx(100 / 60)
    assert f.gain.low == pytest.approx(1 + (100 / 60 - 1) / 2)


def test_cpu_bound_loader_already_using_its_share_gets_no_more_workers():
    ev = Evidence(
        source="profile", device="cpu", input_wait_pct=30, loader_num_workers=2, cpu_count=2, cpu_util_pct=70
    )
    f = found(ev)["input_bound"]
    assert f.metrics["suggested_num_workers"] is None and "rather than adding workers" in f.fix


def test_cpu_only_runs_get_no_pin_memory_and_no_idle_device():
    ev = Evidence(
        source="profile", device="cpu", input_wait_pct=30, loader_num_workers=0, cpu_count=8, cpu_util_pct=20
    )
    f = found(ev)["input_bound"]
    assert "pin_memory" not in f.fix + f.fix_snippet and "non_blocking" not in f.fix_snippet
    assert "device idles" not in f.summary and "computation stalls" in f.summary
    gpu = found(Evidence(source="profile", device="cuda", input_wait_pct=30, cpu_count=8, cpu_util_pct=20))
    assert (
        "pin_memory=True" in gpu["input_bound"].fix_snippet and "device idles" in gpu["input_bound"].summary
    )


def test_framework_decides_the_snippet_form():
    base = dict(source="profile", device="cuda", input_wait_pct=30, loader_num_workers=0, cpu_count=8)
    hf = found(Evidence(**base, framework="hf-trainer", cpu_util_pct=20))["input_bound"]
    assert hf.fix_snippet.startswith("TrainingArguments(") and "dataloader_num_workers=7" in hf.fix_snippet
    assert "DataLoader(" not in hf.fix_snippet
    pl = found(Evidence(**base, framework="lightning", cpu_util_pct=20))["input_bound"]
    assert "LightningDataModule" in pl.fix_snippet and "def train_dataloader(self)" in pl.fix_snippet


def test_saturated_cpu_measured_fires_and_names_cores():
    ev = Evidence(
        source="profile", device="cpu", input_wait_pct=40, loader_num_workers=1, cpu_count=2, cpu_util_pct=97
    )
    f = found(ev)["loader_cpu_saturated"]
    assert (
        f.confidence == "high" and "97 % busy on 2 cores" in f.summary and "shares those cores" in f.summary
    )
    assert found(ev)["input_bound"].gain.high <= 100 / 97 + 1e-9
