"""`gpuwise exporter` over real HTTP: served on a free loopback port with faked NVML (tests/fake_nvml.py),
scraped with urllib, parsed with prometheus_client's own parser."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fake_nvml import fake_nvml
from gpuwise.errors import GpuwiseError
from gpuwise.exporter import scrape as exporter
from gpuwise.monitor.sampler import GpuSampler
from gpuwise.units import GiB


def scrape(scenario: str, scrapes: int = 1) -> dict[str, list]:
    """Metric name -> samples of the last of ``scrapes`` scrapes."""
    with fake_nvml(scenario):
        sampler = GpuSampler()
        server = exporter.start(sampler, "127.0.0.1:0", usd_per_gpu_hour=2.0)
        try:
            url = f"http://127.0.0.1:{server.server_port}/metrics"
            for _ in range(scrapes):
                with urllib.request.urlopen(url, timeout=10) as response:
                    assert response.status == 200
                    text = response.read().decode()
        finally:
            server.shutdown()
            server.server_close()
            sampler.close()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def one(samples: dict[str, list], name: str, **labels: str) -> float:
    found = [s.value for s in samples[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_metrics_follow_prometheus_naming_with_base_units_and_labels():
    samples = scrape("healthy_and_idle", scrapes=2)
    assert all(name.startswith("gpuwise_") for name in samples)
    assert one(samples, "gpuwise_gpu_busy_ratio", gpu="0") == pytest.approx(0.97)
    assert one(samples, "gpuwise_gpu_busy_ratio", gpu="1") == 0.0
    assert one(samples, "gpuwise_gpu_memory_used_bytes", gpu="0") == 66 * GiB
    assert one(samples, "gpuwise_gpu_power_watts", gpu="0") == 342.0
    assert one(samples, "gpuwise_gpu_sm_clock_hertz", gpu="0") == 1410e6
    assert one(samples, "gpuwise_gpu_energy_joules_total", gpu="0") == pytest.approx(912_345.678 + 2)
    labels = samples["gpuwise_gpu_temperature_celsius"][0].labels
    assert set(labels) == {"gpu", "uuid", "name", "hostname"}
    assert labels["uuid"] == "GPU-0a" and labels["name"] == "NVIDIA A100-SXM4-80GB"
    assert one(samples, "gpuwise_gpu_clock_event_reason", gpu="1", reason="gpu_idle") == 1.0
    assert one(samples, "gpuwise_gpu_kpi_breach", gpu="1", kpi="idle", finding="gpu_idle") == 1.0
    assert one(samples, "gpuwise_gpu_price_usd_per_hour", gpu="0") == 2.0
    assert one(samples, "gpuwise_gpu_ecc_errors_total", gpu="0", counter="aggregate", type="corrected") == 3


def test_throttle_reasons_are_a_labelled_gauge_and_processes_carry_no_command_line():
    samples = scrape("throttled")
    for reason, active in [("sw_power_cap", 1), ("hw_thermal_slowdown", 1), ("hw_slowdown", 0)]:
        assert one(samples, "gpuwise_gpu_clock_event_reason", reason=reason) == active
    process = samples["gpuwise_gpu_process_memory_used_bytes"][0]
    assert set(process.labels) == {"gpu", "uuid", "name", "hostname", "pid", "user", "process"}
    assert process.labels["pid"] == "4242" and process.value == int(65.5 * GiB)
    assert one(samples, "gpuwise_gpu_process_sm_busy_ratio", pid="4242") == pytest.approx(0.88)


def test_xid_errors_are_a_counter_per_xid():
    samples = scrape("ecc_errors", scrapes=2)
    assert one(samples, "gpuwise_gpu_xid_errors_total", xid="48") == 2.0
    assert one(samples, "gpuwise_gpu_xid_errors_total", xid="94") == 1.0


def test_unsupported_fields_are_left_out_and_a_lost_gpu_says_so():
    unsupported = scrape("unsupported")
    assert "gpuwise_gpu_energy_joules_total" not in unsupported
    assert "gpuwise_gpu_clock_event_reason" not in unsupported
    assert one(unsupported, "gpuwise_gpu_busy_ratio") == pytest.approx(0.97)
    lost = scrape("lost_mid_run", scrapes=2)
    assert one(lost, "gpuwise_gpu_lost", gpu="1") == 1.0 and one(lost, "gpuwise_gpu_lost", gpu="0") == 0.0
    assert [s.labels["gpu"] for s in lost["gpuwise_gpu_busy_ratio"]] == ["0"]


@pytest.mark.parametrize(
    "listen, expected",
    [("127.0.0.1:9835", ("127.0.0.1", 9835)), ("[::1]:9000", ("::1", 9000)), (":9835", ("0.0.0.0", 9835))],
)
def test_listen_addresses(listen, expected):
    assert exporter.parse_listen(listen) == expected


@pytest.mark.parametrize("listen", ["9835", "localhost:http", "127.0.0.1:70000"])
def test_a_bad_listen_address_is_one_clear_error(listen):
    with pytest.raises(GpuwiseError, match="HOST:PORT"):
        exporter.parse_listen(listen)


def test_loopback_is_told_apart_from_other_interfaces():
    assert (
        exporter.is_loopback("127.0.0.1")
        and exporter.is_loopback("::1")
        and exporter.is_loopback("localhost")
    )
    assert not exporter.is_loopback("0.0.0.0") and not exporter.is_loopback("10.0.0.5")
