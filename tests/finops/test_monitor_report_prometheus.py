"""`gpuwise monitor report --prometheus URL`: the FinOps report of a fleet, end to end through Debian's
Prometheus scraping gpuwise's exporter on faked NVML plus dcgm-exporter and nvitop-exporter text servers
(the fixture of tests/finops/test_monitor_prometheus.py: no GPU and no real dcgm/nvitop exporter here)."""

from __future__ import annotations

import json

import pytest
from test_monitor import run_cli
from test_monitor_prometheus import STEP_S, fleet  # noqa: F401  # the Prometheus fixture, one start for both


@pytest.fixture(scope="module")
def report(fleet):  # noqa: F811  # the fixture imported above
    """The Prometheus URL."""
    return fleet[0]


def report_json(capfd, url: str) -> dict:
    code, out, err = run_cli(
        capfd, "monitor", "report", "--prometheus", url, "--since", "10m", "--step", f"{STEP_S:g}s",
        "--usd-per-gpu-hour", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)


def test_a_fleet_report_from_prometheus_prices_idle_throttled_and_lost_gpus(report, capfd):
    data = report_json(capfd, report)
    assert data["origin"].startswith("prometheus http://127.0.0.1:")
    gpus = {g["uuid"]: g for g in data["gpus"]}
    busy, idle, throttled, lost = (gpus[u] for u in ("GPU-0a", "GPU-1b", "GPU-2c", "GPU-7b"))
    assert idle["idle_hours"] == pytest.approx(idle["observed_hours"]) and idle["idle_hours"] > 0
    assert idle["idle_usd"] == pytest.approx(2 * idle["idle_hours"])
    assert busy["idle_hours"] == 0 and busy["busy_in_use_pct"] == pytest.approx(97.0)
    assert throttled["throttle_hours"]["sw_power_cap"] > 0 and throttled["kpi_pct"]["not_throttled"] < 50
    assert lost["lost_hours"] > 0
    assert "gpuwise_gpu_energy_joules_total" in busy["energy_source"] and busy["energy_kwh"] is not None
    assert any(p["process"].startswith("4242 ") for p in busy["processes"])  # attributed from the exporter
    assert data["totals"]["observed_hours"] == pytest.approx(sum(g["observed_hours"] for g in data["gpus"]))
