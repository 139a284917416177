"""`gpuwise exporter --names dcgm` over real HTTP on faked NVML: dcgm-exporter's names, units (%, MiB, MHz,
W, mJ, C) and labels (gpu, UUID, device, modelName, Hostname); the pid label bounded to the top N
processes by GPU memory with the rest summed as pid="other"; the CLI refusing bad values in one line."""

from __future__ import annotations

import urllib.request
from unittest import mock

import pynvml
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fake_nvml import FakeNvml, scenario
from gpuwise.cli.app import main
from gpuwise.exporter import scrape as exporter
from gpuwise.exporter.dcgm_names import DCGM_FIELDS, DCGM_LABELS, MIB
from gpuwise.monitor.sampler import GpuSampler
from gpuwise.report.monitor_view import metric_reference
from gpuwise.units import GiB

PROCS = [[101, 30.0], [102, 20.0], [103, 5.0], [104, 1.5]]  # GiB; 103 and 104 are the smallest


def serve(gpus: list[dict], **options) -> tuple[str, dict[str, list]]:
    """One scrape after a first one; (raw text, metric name -> samples)."""
    with mock.patch.multiple(pynvml, **FakeNvml(gpus).patches()):
        sampler = GpuSampler()
        server = exporter.start(sampler, "127.0.0.1:0", usd_per_gpu_hour=2.5, **options)
        try:
            for _ in range(2):
                url = f"http://127.0.0.1:{server.server_port}/metrics"
                with urllib.request.urlopen(url, timeout=10) as response:
                    text = response.read().decode()
        finally:
            server.shutdown()
            server.server_close()
            sampler.close()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return text, out


def value(samples: dict[str, list], name: str, **labels: str) -> float:
    found = [s.value for s in samples[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_dcgm_names_units_and_labels():
    gpus = scenario("healthy_and_idle") + scenario("ecc_errors")
    text, samples = serve(gpus, naming="dcgm")
    gib_in_mib = GiB / MIB
    expected = {
        "DCGM_FI_DEV_GPU_UTIL": (97, 0, 97),  # %
        "DCGM_FI_DEV_MEM_COPY_UTIL": (60, 0, 60),
        "DCGM_FI_DEV_SM_CLOCK": (1410, 210, 1410),  # MHz
        "DCGM_FI_DEV_POWER_USAGE": (342, 61, 342),  # W
        "DCGM_FI_DEV_GPU_TEMP": (61, 61, 61),
        "DCGM_FI_DEV_MEMORY_TEMP": (68, 68, 68),
        "DCGM_FI_DEV_FB_TOTAL": (80 * gib_in_mib,) * 3,  # MiB
        "DCGM_FI_DEV_FB_FREE": (
            (14 - 0.59) * gib_in_mib,
            (79.5 - 0.59) * gib_in_mib,
            (14 - 0.59) * gib_in_mib,
        ),
        "DCGM_FI_DEV_FB_RESERVED": (0.59 * gib_in_mib,) * 3,
        # used excludes the reserved memory (NVML v2), as dcgm-exporter counts it
        "DCGM_FI_DEV_FB_USED": (
            66 * gib_in_mib,
            0.5 * gib_in_mib,
            66 * gib_in_mib,
        ),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": (0, 0, 5000),
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": (0, 0, 12),
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (0, 0, 2),
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": (3, 3, 40),
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (0, 0, 1),
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": (0, 0, 3),
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": (0, 0, 0),
        "DCGM_FI_DEV_XID_ERRORS": (0, 0, 94),  # the last XID (48, 48, 94)
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": (0, 1, 0),  # NVML's bitmask: 0x1 gpu_idle
        "DCGM_FI_DEV_ENC_UTIL": (0, 0, 0),
    }
    for name, per_gpu in expected.items():
        for gpu, want in enumerate(per_gpu):
            assert value(samples, name, gpu=str(gpu)) == pytest.approx(want, abs=1e-6), (name, gpu)
    # mJ: the fake's counter is 912,345,678 mJ plus 1 J per read of GPU 0 (two scrapes: 2 reads)
    assert value(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="0") == 912_345_678 + 2000
    labels = samples["DCGM_FI_DEV_GPU_UTIL"][2].labels
    assert tuple(sorted(labels)) == tuple(sorted(DCGM_LABELS))
    assert labels["UUID"] == "GPU-5f" and labels["device"] == "nvidia2"
    assert labels["modelName"] == "NVIDIA A100-SXM4-80GB" and labels["Hostname"]
    # counters keep dcgm-exporter's names (no _total): served untyped
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION untyped" in text
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total" not in text
    # a reading served under a DCGM name is not served twice; gpuwise-only ones keep their name
    for covered in ("gpuwise_gpu_busy_ratio", "gpuwise_gpu_power_watts", "gpuwise_gpu_ecc_errors_total"):
        assert covered not in samples
    assert value(samples, "gpuwise_gpu_price_usd_per_hour", gpu="1", UUID="GPU-1b") == 2.5
    assert value(samples, "gpuwise_gpu_kpi_breach", gpu="1", kpi="idle") == 1
    assert value(samples, "gpuwise_gpu_lost", gpu="2") == 0
    assert {f.name for f in DCGM_FIELDS} <= set(samples)
    # `gpuwise exporter --names dcgm --json` lists exactly what is served
    assert {m["name"] for m in metric_reference("dcgm")} == set(samples)


def test_native_names_carry_the_new_fields_in_base_units():
    _, samples = serve(scenario("ecc_errors"))
    assert value(samples, "gpuwise_gpu_memory_reserved_bytes") == int(0.59 * GiB)
    assert value(samples, "gpuwise_gpu_memory_free_bytes") == 80 * GiB - 66 * GiB - int(0.59 * GiB)
    assert value(samples, "gpuwise_gpu_memory_temperature_celsius") == 68
    assert value(samples, "gpuwise_gpu_pcie_replays_total") == 5000
    assert value(samples, "gpuwise_gpu_encoder_busy_ratio") == 0
    assert value(samples, "gpuwise_gpu_remap_failed") == 0
    assert not any(name.startswith("DCGM_") for name in samples)


@pytest.mark.parametrize("naming", ["gpuwise", "dcgm"])
def test_pid_label_is_bounded_to_the_top_processes(naming):
    gpu = {
        **scenario("healthy_and_idle")[0],
        "processes": PROCS,
        "process_sm": [[101, 10, 50], [102, 10, 30], [103, 10, 6], [104, 10, 4]],
    }
    _, samples = serve([gpu], naming=naming, top_processes=2)
    memory = {s.labels["pid"]: s.value for s in samples["gpuwise_gpu_process_memory_used_bytes"]}
    assert memory == {"101": int(30 * GiB), "102": int(20 * GiB), "other": int(5 * GiB) + int(1.5 * GiB)}
    sm = {s.labels["pid"]: s.value for s in samples["gpuwise_gpu_process_sm_busy_ratio"]}
    assert sm == pytest.approx({"101": 0.5, "102": 0.3, "other": 0.1})
    other = next(s for s in samples["gpuwise_gpu_process_memory_used_bytes"] if s.labels["pid"] == "other")
    assert other.labels["process"] == "other" and other.labels["user"] == ""


def test_default_top_processes_keeps_five():
    gpu = {**scenario("healthy_and_idle")[0], "processes": [[200 + i, 1.0 + i] for i in range(7)]}
    _, samples = serve([gpu])
    pids = [s.labels["pid"] for s in samples["gpuwise_gpu_process_memory_used_bytes"]]
    assert exporter.DEFAULT_TOP_PROCESSES == 5
    assert sorted(pids) == sorted(["206", "205", "204", "203", "202", "other"])


@pytest.mark.parametrize(
    "argv, says",
    [
        (["exporter", "--names", "dcgm-exporter"], "--names must be gpuwise or dcgm"),
        (["exporter", "--top-processes", "-1"], "--top-processes must be a finite number ≥ 0 and ≤ 1000"),
    ],
)
def test_bad_exporter_options_are_one_line(capsys, argv, says):
    """Through the real entry point (`gpuwise.cli.app.main`): exit 2, one line, before NVML is opened."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert done.value.code == 2
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: ") and says in lines[0], err
