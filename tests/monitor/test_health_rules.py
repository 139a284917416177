"""Health rules on faked NVML (issue 30 item 2): ECC (since boot and lifetime), corrected-error storms,
PCIe replays, row remapping / retired pages, XID errors, and memory used from NVML's v2 call."""

from __future__ import annotations

from unittest import mock

import pynvml
import pytest

from fake_nvml import fake_nvml
from gpuwise.diagnose import thresholds as T
from gpuwise.monitor import kpi
from gpuwise.monitor.sampler import GpuSampler
from gpuwise.units import GiB


def _findings(scenario: str, **changes) -> dict[str, object]:
    patched = fake_nvml(scenario)
    patched.fake.gpus[0].update(changes)
    with patched:
        sampler = GpuSampler()
        snap = sampler.sample()
        sampler.close()
    return {f.id: f for f in kpi.verdicts(snap, 2.0)[0].findings}


def test_uncorrected_ecc_remaps_and_xids_are_findings_naming_the_counts():
    found = _findings("ecc_errors")
    ecc = found["gpu_ecc_uncorrected"]
    assert ecc.severity == "critical" and "2 since the driver loaded" in ecc.summary
    assert "2 over the GPU's life" in ecc.summary
    assert found["gpu_memory_remapped"].severity == "high"  # pending: takes effect at the next reset
    xid = found["gpu_xid_errors"]
    assert (
        xid.severity == "high"
        and "48 (double-bit ECC error)" in xid.summary
        and xid.metrics["xid_errors"] == [48, 48, 94]
    )
    assert "gpu_ecc_corrected_storm" not in found  # 12 corrected since boot: no storm
    assert "5,000" in found["gpu_pcie_replays"].summary or "5000" in found["gpu_pcie_replays"].summary


def test_lifetime_uncorrected_ecc_alone_is_high():
    found = _findings("healthy_and_idle", ecc={"volatile": [0, 0], "aggregate": [3, 5]})
    assert found["gpu_ecc_uncorrected"].severity == "high"
    assert "5 over the GPU's life" in found["gpu_ecc_uncorrected"].summary


def test_a_storm_of_corrected_errors_and_pcie_replays_are_flagged_at_their_bars():
    found = _findings(
        "healthy_and_idle", ecc={"volatile": [250_000, 0], "aggregate": [250_000, 0]}, pcie_replays=5000
    )
    assert "250,000 corrected ECC errors" in found["gpu_ecc_corrected_storm"].summary
    replays = found["gpu_pcie_replays"]
    assert replays.metrics["pcie_replays"] == 5000 and replays.severity == "medium"  # no rate yet
    below = _findings(
        "healthy_and_idle",
        ecc={"volatile": [T.ECC_CORRECTED_STORM - 1, 0], "aggregate": [0, 0]},
        pcie_replays=T.PCIE_REPLAYS_SINCE_BOOT_MAX - 1,
    )
    assert "gpu_ecc_corrected_storm" not in below and "gpu_pcie_replays" not in below


def test_a_replay_rate_over_dcgms_8_a_minute_is_high():
    patched = fake_nvml("healthy_and_idle")
    with patched:
        sampler = GpuSampler()
        patched.fake.gpus[0]["pcie_replays"] = 100
        first = sampler.sample()
        patched.fake.gpus[0]["pcie_replays"] = 100 + 9 * 2  # 18 more over 2 minutes: 9 a minute
        with mock.patch("gpuwise.monitor.sampler.time.time", return_value=first.time_unix_s + 120):
            snap = sampler.sample()
        sampler.close()
    assert snap.gpus[0].pcie_replays_per_min == pytest.approx(9.0)
    replays = next(f for f in kpi.verdicts(snap, 2.0)[0].findings if f.id == "gpu_pcie_replays")
    assert replays.severity == "high"


def test_retired_pages_past_dcgms_hard_limit_mean_replace():
    found = _findings("healthy_and_idle", retired_pages=[40, 23])
    assert (
        found["gpu_memory_remapped"].severity == "critical"
        and "63 retired pages" in found["gpu_memory_remapped"].summary
    )


def test_memory_used_comes_from_nvmls_v2_call_and_falls_back_to_v1():
    patched = fake_nvml("healthy_and_idle")
    patched.fake.gpus[0].update(used_gib=41.0 - 0.59, reserved_gib=0.59)  # v1 says 41.0 GiB, nvitop 40.41
    with patched:
        sampler = GpuSampler()
        r = sampler.sample().gpus[0]
        sampler.close()
    assert r.memory_used_bytes == int((41.0 - 0.59) * GiB)
    assert r.memory_reserved_bytes == int(0.59 * GiB) and "memory_v2" not in r.not_available
    old = fake_nvml("healthy_and_idle")
    old.fake.gpus[0].update(used_gib=41.0 - 0.59, reserved_gib=0.59)
    v1 = pynvml.nvmlDeviceGetMemoryInfo

    with old:
        real = pynvml.nvmlDeviceGetMemoryInfo

        def no_v2(handle, *version):
            if version:  # a driver before nvmlDeviceGetMemoryInfo_v2
                raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            return real(handle)

        with mock.patch.object(pynvml, "nvmlDeviceGetMemoryInfo", side_effect=no_v2) as patched_v1:
            sampler = GpuSampler()
            r = sampler.sample().gpus[0]
            sampler.sample()
            sampler.close()
    assert abs(r.memory_used_bytes - 41.0 * GiB) <= 1 and r.memory_reserved_bytes is None  # v1: reserved in
    assert "memory_v2" not in r.not_available
    v2_calls = [c for c in patched_v1.call_args_list if len(c.args) > 1]
    assert len(v2_calls) == 2  # asked once per GPU (two here), then v1 only
    assert pynvml.nvmlDeviceGetMemoryInfo is v1
