"""`gpuwise monitor` on faked NVML (no GPU here): tests/data/nvml/scenarios.json replayed through pynvml's
own functions and structs (tests/fake_nvml.py), then through the real sampler, KPI checks, views and CLI."""

from __future__ import annotations

import io
import json
import os

import pynvml
import pytest
from rich.console import Console

from fake_nvml import FakeNvml, fake_nvml, no_driver, scenario
from gpuwise.cli.app import main
from gpuwise.monitor import kpi
from gpuwise.monitor.sampler import GpuSampler, NoNvml
from gpuwise.report import monitor_view, terminal
from gpuwise.tui import live
from gpuwise.units import GiB


def snapshots(name: str, n: int = 2, host: bool = False):
    with fake_nvml(name):
        sampler = GpuSampler()
        taken = [sampler.sample(host) for _ in range(n)]
        sampler.close()
    return taken


def breaches(name: str) -> dict[int, dict[str, str]]:
    snap = snapshots(name)[-1]
    return {v.index: {b.kpi: b.finding_id for b in v.breaches} for v in kpi.verdicts(snap)}


def run_cli(capfd, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    out, err = capfd.readouterr()
    return code, out, err


def test_a_healthy_gpu_reads_every_field_with_its_unit():
    gpu = snapshots("healthy_and_idle")[-1].gpus[0]
    assert gpu.busy_pct == 97.0 and gpu.memory_busy_pct == 60.0
    assert gpu.memory_used_bytes == 66 * GiB and gpu.memory_total_bytes == 80 * GiB
    assert gpu.headroom_pct == pytest.approx(17.5)
    assert (gpu.sm_clock_mhz, gpu.sm_clock_max_mhz) == (1410.0, 1410.0)
    assert (gpu.power_w, gpu.power_limit_w) == (342.0, 400.0)  # NVML milliwatts -> watts
    assert gpu.energy_j == pytest.approx(912_345_678 / 1000 + 2)  # millijoules -> joules, counter moves
    assert gpu.throttle_reasons == [] and gpu.mig_enabled is False
    assert (gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width, gpu.pcie_width_max) == (4, 4, 16, 16)
    assert gpu.pcie_tx_bytes_per_s == 1_200_000 * 1024  # NVML KB/s
    assert gpu.ecc_aggregate_corrected == 3 and gpu.ecc_volatile_uncorrected == 0
    assert gpu.processes is not None and gpu.processes[0].pid == 4242
    assert gpu.processes[0].gpu_memory_bytes == int(65.5 * GiB)
    assert gpu.processes[0].sm_pct == 88.0  # the latest of NVML's buffered samples
    assert gpu.uuid == "GPU-0a" and gpu.not_available == {}


def test_an_idle_gpu_is_a_breach_and_its_price_is_spent_idle():
    assert breaches("healthy_and_idle") == {0: {}, 1: {"idle": "gpu_idle"}}
    snap = snapshots("healthy_and_idle")[-1]
    found = kpi.verdicts(snap)
    cost = kpi.cost(snap, found)
    a100 = found[0].usd_per_hour
    assert found[0].catalog_id == "a100-80gb-sxm" and a100 is not None and a100 > 0
    assert cost.usd_per_hour == pytest.approx(2 * a100) and cost.idle_usd_per_hour == pytest.approx(a100)
    flat = kpi.cost(snap, kpi.verdicts(snap), usd_per_gpu_hour=2.5)
    assert (flat.usd_per_hour, flat.idle_usd_per_hour, flat.price_source) == (5.0, 2.5, "--usd-per-gpu-hour")
    # an idle GPU drops its PCIe link to gen1 to save power: not a downgrade
    assert kpi.pcie_downgrade(snap.gpus[1]) is None


def test_power_and_thermal_throttling_are_decoded_and_explained_by_the_throttling_rule():
    snap = snapshots("throttled")[-1]
    gpu = snap.gpus[0]
    assert gpu.throttle_reasons == ["sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown"]
    verdict = kpi.verdicts(snap)[0]
    assert {b.kpi: b.finding_id for b in verdict.breaches} == {"throttling": "throttling"}
    assert [f.id for f in verdict.findings] == ["throttling"]


def test_a_narrow_pcie_link_is_a_downgrade():
    assert breaches("pcie_downgraded") == {0: {"pcie": "pcie_downgraded"}}
    snap = snapshots("pcie_downgraded")[-1]
    assert kpi.pcie_downgrade(snap.gpus[0]) == "PCIe gen3 x8 of gen4 x16"


def test_mig_mode_is_read_and_an_unsupported_busy_counter_is_na():
    gpu = snapshots("mig")[-1].gpus[0]
    assert gpu.mig_enabled is True and gpu.busy_pct is None
    assert "Not Supported" in gpu.not_available["busy"]
    assert breaches("mig") == {0: {}}  # 12.5 % headroom, no busy figure: nothing to flag


def test_uncorrected_ecc_a_pending_row_remap_and_xids_are_flagged():
    gpu = snapshots("ecc_errors")[-1].gpus[0]
    assert (gpu.ecc_volatile_corrected, gpu.ecc_volatile_uncorrected) == (12, 2)
    assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable, gpu.remap_pending) == (3, 1, True)
    assert gpu.xid_errors == [48, 48, 94]  # the events NVML queued, kept for the rest of the run
    # the breach names the health rule that explains it (issue 30: a finding, not a bare breach)
    assert breaches("ecc_errors") == {0: {"memory_errors": "gpu_ecc_uncorrected", "xid": "gpu_xid_errors"}}
    assert "2 uncorrected ECC errors" in (kpi.memory_errors(gpu) or "")


def test_a_gpu_lost_mid_run_is_marked_lost_and_the_other_keeps_being_read():
    first, second, third = snapshots("lost_mid_run", n=3)
    assert not first.gpus[1].lost and first.gpus[1].busy_pct == 97.0
    for snap in (second, third):
        assert snap.gpus[1].lost and snap.gpus[1].busy_pct is None
        assert snap.gpus[0].busy_pct == 97.0 and not snap.gpus[0].lost
    assert breaches("lost_mid_run")[1] == {"lost": "gpu_lost"}


def test_unsupported_fields_are_none_and_asked_only_once():
    fake = FakeNvml(scenario("unsupported"))
    from unittest import mock

    with mock.patch.multiple(pynvml, **fake.patches()):
        sampler = GpuSampler()
        for _ in range(3):
            gpu = sampler.sample().gpus[0]
        energy_calls = pynvml.nvmlDeviceGetTotalEnergyConsumption.call_count
    assert energy_calls == 1  # NOT_SUPPORTED will not change: not asked again
    for name in ("energy_j", "ecc_volatile_uncorrected", "retired_pages", "remapped_rows_correctable"):
        assert getattr(gpu, name) is None, name
    assert gpu.throttle_reasons is None and gpu.mig_enabled is None and gpu.processes is None
    assert gpu.xid_errors is None and "xid" in gpu.not_available
    assert gpu.pcie_tx_bytes_per_s is None and gpu.busy_pct == 97.0
    text = _render(monitor_view.document(*_judged(snapshots("unsupported")[-1])))
    assert "n/a" in text and "TITAN RTX" in text


def test_process_user_and_name_come_from_psutil_never_the_command_line():
    from gpuwise.monitor.reading import _owner

    user, name = _owner(os.getpid())
    import psutil

    me = psutil.Process()
    assert (user, name) == (me.username(), me.name())
    assert _owner(2**22 + 12345) == (None, None)  # no such pid: n/a, not a crash


def test_an_rtx_3090_is_not_priced_as_an_rtx_4090():
    assert kpi.catalog_id("NVIDIA GeForce RTX 3090") != "rtx-4090"
    assert kpi.catalog_id("NVIDIA A100-SXM4-80GB") == "a100-80gb-sxm"


def _judged(snap):
    found = kpi.verdicts(snap)
    return snap, found, kpi.cost(snap, found)


def _render(doc) -> str:
    out = Console(file=io.StringIO(), width=160, color_system=None)
    terminal.render(out, doc)
    return out.file.getvalue()  # type: ignore[attr-defined]


def test_once_json_is_one_snapshot_with_units_in_the_names(capfd):
    with fake_nvml("healthy_and_idle"):
        code, out, err = run_cli(capfd, "monitor", "--once", "--json", "--usd-per-gpu-hour", "2")
    assert code == 0, err
    data = json.loads(out)
    assert data["kind"] == "monitor" and len(data["gpus"]) == 2
    assert data["gpus"][0]["memory_used_bytes"] == 66 * GiB and data["gpus"][0]["power_w"] == 342.0
    assert data["gpus"][1]["memory_headroom_pct"] == pytest.approx(99.375)
    assert data["verdicts"][1]["breaches"] == [
        {"kpi": "idle", "text": "idle: busy 0 %", "finding_id": "gpu_idle"}
    ]
    assert data["cost"] == {
        "usd_per_hour": 4.0,
        "idle_usd_per_hour": 2.0,
        "price_source": "--usd-per-gpu-hour",
    }


def test_once_terminal_view_shows_breaches_with_finding_ids(capfd):
    with fake_nvml("throttled"):
        code, out, _ = run_cli(capfd, "monitor", "--once")
    assert code == 0
    assert "hw_thermal_slowdown" in out and "throttling" in out and "KPI breaches" in out
    with fake_nvml("pcie_downgraded"):
        code, out, _ = run_cli(capfd, "monitor", "--markdown")
    assert code == 0 and "pcie_downgraded" in out and "gen3 x8 of gen4 x16" in out


def test_no_driver_is_one_line_and_exit_2_but_host_still_shows_the_host(capfd):
    with no_driver():
        code, out, err = run_cli(capfd, "monitor", "--once")
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "no NVIDIA GPU" in err and "Traceback" not in err
        code, out, err = run_cli(capfd, "monitor", "--once", "--host", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["gpus"] == [] and data["host"]["memory_total_bytes"] > 0 and "no NVIDIA GPU" in data["no_gpu"]
    with pytest.raises(NoNvml), no_driver():
        GpuSampler()


@pytest.mark.parametrize("args", [["--interval", "5"], ["--interval", "0"], ["--usd-per-gpu-hour", "-1"]])
def test_bad_flags_are_one_line(capfd, args):
    code, _, err = run_cli(capfd, "monitor", *args)
    assert code == 2 and err.startswith("gpuwise: error:") and err.count("\n") == 1


def test_live_view_redraws_and_stops_after_the_refreshes_asked():
    buffer = io.StringIO()
    screen = Console(file=buffer, width=150, force_terminal=True, record=True)
    patched = fake_nvml("lost_mid_run")
    with patched:
        sampler = GpuSampler()
        done = live.run(screen, sampler, interval_s=0.01, refreshes=3)
    assert done == 3
    assert patched.fake.samples[0] == 3  # fake_nvml counts the samples read per GPU
    text = buffer.getvalue()  # the live view writes its frames to the console's file
    assert "(LOST)" in text and "gpu_lost" in text and "A100-SXM4-80GB" in text


def test_exporter_cli_without_a_driver_is_one_line_and_prints_its_metric_reference(capfd):
    with no_driver():
        code, out, err = run_cli(capfd, "exporter", "--listen", "127.0.0.1:0")
    assert code == 2 and err.count("\n") == 1 and "no NVIDIA GPU" in err
    code, out, err = run_cli(capfd, "exporter", "--markdown")
    assert code == 0 and "gpuwise_gpu_energy_joules_total" in out and "nvmlDeviceGetPowerUsage" in out
    code, _, err = run_cli(capfd, "exporter", "--listen", "nowhere")
    assert code == 2 and "HOST:PORT" in err


def test_html_report_of_one_snapshot(capfd, tmp_path):
    page = tmp_path / "monitor.html"
    with fake_nvml("ecc_errors"):
        code, _, err = run_cli(capfd, "monitor", "--html", str(page))
    assert code == 0, err
    html = page.read_text(encoding="utf-8")
    assert "gpu_ecc_uncorrected" in html and "gpu_xid_errors" in html and "<script" not in html


def test_a_gpu_nvml_cannot_open_is_listed_lost_and_a_failing_count_is_one_line(capfd):
    from unittest import mock

    def handle(index):
        if index == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return index

    with (
        fake_nvml("lost_mid_run"),
        mock.patch.object(pynvml, "nvmlDeviceGetHandleByIndex", side_effect=handle),
    ):
        snap = GpuSampler().sample()
    assert [g.lost for g in snap.gpus] == [False, True]
    assert snap.gpus[1].not_available["gpu"] == "GPU is lost"
    # no driver inventory here: named (and priced) as the node's one model, and said so (issue 30)
    assert (
        snap.gpus[1].name == "NVIDIA A100-SXM4-80GB" and "assumed" in snap.gpus[1].not_available["identity"]
    )
    failing = pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
    with fake_nvml("healthy_and_idle"), mock.patch.object(pynvml, "nvmlDeviceGetCount", side_effect=failing):
        code, _, err = run_cli(capfd, "monitor", "--once")
    assert code == 2 and "NVML cannot list the GPUs" in err and err.count("\n") == 1
