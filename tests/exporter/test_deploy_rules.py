"""The shipped Prometheus rules and Grafana dashboard (deploy/): `promtool check rules` and `promtool test
rules` (real binaries; a broken threshold makes the unit tests fail), the rules' thresholds equal to
gpuwise's own, and every dashboard query evaluated by a real Prometheus that scrapes a real
`gpuwise exporter --names dcgm` on 127.0.0.1 (faked NVML) with the rules loaded: each returns series."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from unittest import mock

import pynvml
import pytest

from fake_nvml import FakeNvml, scenario
from gpuwise.diagnose import thresholds as T
from gpuwise.exporter import scrape as exporter
from gpuwise.finops.prometheus_source import load_history
from gpuwise.monitor.sampler import GpuSampler
from gpuwise.units import GiB
from prometheus_server import instant, prometheus, wait_for_samples

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "gpuwise-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "gpuwise-rules.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "gpuwise-dashboard.json"
STARTED: list[float] = []  # when the served fixture's exporter started (Unix s)


def served_start() -> float:
    return STARTED[-1]


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("no promtool: apt-get install prometheus (tests/system_tools.py)")
    return found


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_check_rules():
    done = run("check", "rules", str(RULES), cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 15 rules found" in done.stdout


def test_promtool_test_rules_passes_and_can_fail(tmp_path):
    done = run("test", "rules", RULE_TESTS.name, cwd=RULES.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
    # the same unit tests against rules whose storm threshold is 1000x too high: they must fail
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    (tmp_path / RULES.name).write_text(RULES.read_text().replace("[1h]) > 1000", "[1h]) > 1000000"))
    broken = run("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert broken.returncode != 0 and "GpuCorrectedEccStorm" in broken.stdout + broken.stderr


def test_rule_thresholds_are_gpuwise_thresholds():
    text = RULES.read_text()
    idle = f"< {T.MONITOR_IDLE_BUSY_PCT:g})"
    assert text.count(idle) == 2  # idle spend and idle memory held
    assert f"FB_USED:ratio >= {T.IDLE_MEMORY_HELD_MIN_PCT / 100:g})" in text
    assert f"for: {T.IDLE_MEMORY_HELD_MIN_HOURS * 60:g}m" in text
    assert f":avg5m < {T.MONITOR_BUSY_KPI_PCT:g}" in text


def dashboard_queries() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def grafana_variables(expr: str) -> str:
    """Grafana's substitutions for 'All' ($Hostname, $gpu -> .*) and $__rate_interval (4 scrapes or more)."""
    expr = expr.replace("$__rate_interval", "1m")
    return re.sub(r"\$(Hostname|gpu)\b", ".*", expr)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A real Prometheus with the shipped rules (evaluated every second) scraping `gpuwise exporter --names
    dcgm` on three faked GPUs (busy, idle, ECC errors) with four processes on GPU 0 and --top-processes 2."""
    gpus = scenario("healthy_and_idle") + scenario("ecc_errors")
    gpus[0] = {**gpus[0], "processes": [[101, 30.0], [102, 20.0], [103, 10.0], [104, 5.5]]}
    tmp = tmp_path_factory.mktemp("prometheus")
    rules = tmp / RULES.name
    rules.write_text(RULES.read_text().replace("interval: 30s", "interval: 1s"))
    start = time.time()
    with mock.patch.multiple(pynvml, **FakeNvml(gpus).patches()):
        sampler = GpuSampler()
        server = exporter.start(sampler, "127.0.0.1:0", 2.5, naming="dcgm", top_processes=2)
        try:
            with prometheus([f"127.0.0.1:{server.server_port}"], tmp, rule_files=(rules,)) as url:
                wait_for_samples(url, "DCGM_FI_DEV_GPU_UTIL", 3, 4)
                wait_for_samples(url, "Hostname_gpu:DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION:watts_rate5m", 1, 2)
                STARTED.append(start)
                yield url
        finally:
            server.shutdown()
            server.server_close()
            sampler.close()


@pytest.mark.parametrize("expr", dashboard_queries())
def test_every_dashboard_query_returns_series(served, expr):
    result = instant(served, grafana_variables(expr))
    assert result, f"no series for {expr}"


def test_dashboard_variables_list_the_hosts_and_gpus(served):
    dash = json.loads(DASHBOARD.read_text())
    found = {}
    for var in dash["templating"]["list"]:
        if var["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", var["query"]["query"])
        assert match, var["query"]
        series, label = grafana_variables(match.group(1)), match.group(2)
        query = urllib.parse.urlencode({"match[]": series})
        with urllib.request.urlopen(f"{served}/api/v1/label/{label}/values?{query}", timeout=10) as response:
            found[label] = json.load(response)["data"]
    assert found["gpu"] == ["0", "1", "2"] and len(found["Hostname"]) == 1


def test_recorded_spend_and_the_bounded_pid_label(served):
    (spent,) = instant(served, "Hostname:gpuwise_gpu_price_usd_per_hour:sum")
    (idle,) = instant(served, "Hostname:gpuwise_gpu_idle_usd_per_hour:sum")
    assert float(spent["value"][1]) == 7.5 and float(idle["value"][1]) == 2.5  # GPU 1 idle at $2.50/h
    pids = {r["metric"]["pid"] for r in instant(served, 'gpuwise_gpu_process_memory_used_bytes{gpu="0"}')}
    assert pids == {"101", "102", "other"}


def test_gpuwise_fleet_reader_reads_the_dcgm_names_back(served):
    """`monitor report --prometheus` (load_history) reads `--names dcgm` as it reads dcgm-exporter: busy %,
    memory (FB_USED + FREE + RESERVED = total), power and the energy counter in the right units."""
    history = load_history(served, served_start(), time.time(), 2.0)
    by_uuid = {g.uuid: g for g in history.gpus}
    assert set(by_uuid) == {"GPU-0a", "GPU-1b", "GPU-5f"}
    for uuid, busy, used_gib, watts in [
        ("GPU-0a", 97, 66, 342),
        ("GPU-1b", 0, 0.5, 61),
        ("GPU-5f", 97, 66, 342),
    ]:
        samples = [s for s in by_uuid[uuid].samples if s.busy_pct is not None]
        assert samples and all(s.busy_pct == pytest.approx(busy) for s in samples)
        # FB_USED is NVML v2's used (reserved taken out), as dcgm-exporter counts it
        assert all(s.memory_used_bytes == pytest.approx(used_gib * GiB, rel=1e-6) for s in samples)
        assert all(s.memory_total_bytes == pytest.approx(80 * GiB, rel=1e-6) for s in samples)
        assert all(s.power_w == pytest.approx(watts) for s in samples)
    energy = [s.energy_j for s in by_uuid["GPU-0a"].samples if s.energy_j is not None]
    assert energy and all(912_345.678 <= e < 912_345.678 + 10_000 for e in energy)  # J, from mJ
    assert by_uuid["GPU-0a"].sources["busy_pct"].startswith("DCGM_FI_DEV_GPU_UTIL (dcgm-exporter")
