"""`load_history` through a real Prometheus (Debian's binary, temp TSDB, scraping every second) that
scrapes three exporters at once: gpuwise's own (`exporter.start` on faked NVML: a busy, an idle and a
throttled GPU), and two small real HTTP servers serving dcgm-exporter's and nvitop-exporter's /metrics
text for scenarios of tests/data/nvml. What comes back is compared with what the scenarios served."""

from __future__ import annotations

import base64
import contextlib
import itertools
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pynvml
import pytest

from fake_nvml import FakeNvml, scenario
from gpuwise.errors import GpuwiseError
from gpuwise.exporter import scrape as exporter
from gpuwise.finops import prometheus_http
from gpuwise.finops.prometheus_source import load_history
from gpuwise.monitor.sampler import GpuSampler
from gpuwise.monitor.series import GpuSeries, History
from gpuwise.units import GiB
from prometheus_server import (
    free_port,
    latest_sample_unix_s,
    prometheus,
    text_server,
    wait_for_sample_after,
    wait_for_samples,
)

STEP_S = 2.0
SCRAPES = 8  # samples per series before the window is read


def fleet_gpus() -> list[dict]:
    return scenario("healthy_and_idle") + scenario("throttled")  # busy, idle, power/thermal throttled


def dcgm_text(gpus: list[dict], scrapes: list[int]) -> bytes:
    """dcgm-exporter's /metrics (names, units, labels of its default counters CSV) for these GPUs."""
    scrapes[0] += 1
    lines = []
    for i, g in enumerate(gpus):
        labels = (
            f'gpu="{i}",UUID="DCGM-{g["uuid"]}",device="nvidia{i}",modelName="{g["name"]}",'
            f'Hostname="dcgm-node"'
        )
        mib = 1024
        for name, value in [
            ("DCGM_FI_DEV_GPU_UTIL", g["busy"]),
            ("DCGM_FI_PROF_SM_ACTIVE", g["busy"] / 100 * 0.5),  # synthetic: the scenarios have no SM active
            ("DCGM_FI_DEV_FB_USED", g["used_gib"] * mib),
            ("DCGM_FI_DEV_FB_FREE", (g["total_gib"] - g["used_gib"]) * mib),
            ("DCGM_FI_DEV_POWER_USAGE", g["power_mw"] / 1000),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", g["energy_mj"] + 1000 * scrapes[0]),
            ("DCGM_FI_DEV_GPU_TEMP", g["temp_c"]),
            ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", g["reasons"]),
        ]:
            lines.append(f"{name}{{{labels}}} {value}")
    return ("\n".join(lines) + "\n").encode()


def nvitop_text(gpus: list[dict]) -> bytes:
    """nvitop-exporter's /metrics: prometheus_client gauges with the unit appended, MiB and W."""
    lines = []
    for i, g in enumerate(gpus):
        labels = f'hostname="nvitop-node",index="{i}",devicename="{g["name"]}",uuid="NVITOP-{g["uuid"]}"'
        for name, value in [
            ("gpu_utilization_Percentage", g["busy"]),
            ("gpu_memory_used_MiB", g["used_gib"] * 1024),
            ("gpu_memory_total_MiB", g["total_gib"] * 1024),
            ("gpu_power_usage_W", g["power_mw"] / 1000),
            ("gpu_temperature_C", g["temp_c"]),
        ]:
            lines.append(f"{name}{{{labels}}} {value}")
        for pid, gib in g["processes"]:
            who = f'{labels},pid="{pid}",username="alice"'
            lines.append(f"process_gpu_memory_MiB{{{who}}} {gib * 1024}")
            sm = [s for p, _t, s in g["process_sm"] if p == pid][-1]
            lines.append(f"process_gpu_sm_utilization_Percentage{{{who}}} {sm}")
    return ("\n".join(lines) + "\n").encode()


@contextlib.contextmanager
def running_fleet(tmp: Path) -> Iterator[tuple[str, float, float, FakeNvml, list[int]]]:
    """Prometheus scraping the three exporters; yields (url, start, end, fake NVML, dcgm scrape count)."""
    fake = FakeNvml([*fleet_gpus(), scenario("lost_mid_run")[1]])  # + a GPU lost after its first read
    dcgm_scrapes = [0]
    with mock.patch.multiple(pynvml, **fake.patches()):
        sampler = GpuSampler()
        server = exporter.start(sampler, "127.0.0.1:0")
        try:
            with (
                text_server(lambda: dcgm_text(fleet_gpus(), dcgm_scrapes)) as dcgm,
                text_server(lambda: nvitop_text(scenario("healthy_and_idle"))) as nvitop,
            ):
                start = time.time()
                # nvitop's exporter scraped by two jobs: two series per GPU that must not add up
                targets = [f"127.0.0.1:{server.server_port}", dcgm, nvitop, nvitop]
                with prometheus(targets, tmp) as url:
                    wait_for_samples(url, "gpuwise_gpu_busy_ratio", 3, SCRAPES)
                    wait_for_samples(url, "DCGM_FI_DEV_FB_USED", 3, SCRAPES)
                    wait_for_samples(url, "gpu_utilization_Percentage", 4, SCRAPES)
                    # the window ends at a scrape of gpuwise's exporter, so its energy counter at the end
                    # is that sample whenever the history is read; ending at time.time() left it
                    # interpolated (fractional) or not depending on whether the next scrape had landed
                    end = latest_sample_unix_s(url, "gpuwise_gpu_energy_joules_total")
                    yield url, start, end, fake, dcgm_scrapes
        finally:
            server.shutdown()
            server.server_close()
            sampler.close()


# The fleet running now, kept from one module to the next when that module uses it too (the suite's time:
# Prometheus waits ~13 s for its scrapes, and test_monitor_report_prometheus.py reads the same fleet).
_RUNNING: list[tuple[contextlib.ExitStack, tuple]] = []


def _next_module_uses_fleet(request: pytest.FixtureRequest) -> bool:
    """Whether the test run right after this module's last one is in another module that uses ``fleet``
    (then the fleet stays up for it; any other module runs with it stopped and NVML unpatched)."""
    session = request.session
    if session.shouldstop or session.shouldfail:
        return False
    items = session.items
    mine = [i for i, item in enumerate(items) if getattr(item, "module", None) is request.module]
    if not mine or mine != list(range(mine[0], mine[-1] + 1)):  # shuffled: this module runs again later
        return False
    after = mine[-1] + 1
    return after < len(items) and "fleet" in getattr(items[after], "fixturenames", ())


def _stop_fleet() -> None:
    while _RUNNING:
        _RUNNING.pop()[0].close()


@pytest.fixture(scope="module")
def fleet(request, tmp_path_factory):
    """The running fleet (``running_fleet``): started for the first module that asks, stopped after the
    last of the modules that use it in a row; each module's tests only read it."""
    if not _RUNNING:
        stack = contextlib.ExitStack()
        request.config.add_cleanup(_stop_fleet)  # whatever ends the run, nothing is left running
        value = stack.enter_context(running_fleet(tmp_path_factory.mktemp("prometheus")))
        _RUNNING.append((stack, value))
    try:
        yield _RUNNING[0][1]
    finally:
        if not _next_module_uses_fleet(request):
            _stop_fleet()


@pytest.fixture(scope="module")
def history(fleet) -> History:
    url, start, end, _fake, _ = fleet
    return load_history(url, start, end, STEP_S)


def by_uuid(history: History, uuid: str) -> GpuSeries:
    (found,) = [g for g in history.gpus if g.uuid == uuid]
    return found


def summary(series: list[GpuSeries]) -> tuple[float, float]:
    """Test-only FinOps figures: GPU-hours and the busy % averaged over GPU time."""
    samples = [s for g in series for s in g.samples if s.busy_pct is not None]
    hours = sum(s.interval_s for s in samples) / 3600
    return hours, sum(s.busy_pct * s.interval_s for s in samples) / (hours * 3600)  # type: ignore[operator]


def test_every_gpu_of_every_exporter_is_one_series(history):
    assert history.origin.startswith("prometheus http://127.0.0.1:")
    hosts = {
        (g.hostname, g.gpu_index, g.uuid) for g in history.gpus if g.hostname in ("dcgm-node", "nvitop-node")
    }
    assert hosts == {
        ("dcgm-node", 0, "DCGM-GPU-0a"),
        ("dcgm-node", 1, "DCGM-GPU-1b"),
        ("dcgm-node", 2, "DCGM-GPU-2c"),
        ("nvitop-node", 0, "NVITOP-GPU-0a"),
        ("nvitop-node", 1, "NVITOP-GPU-1b"),
    }
    ours = [g for g in history.gpus if g.uuid and g.uuid.startswith("GPU-")]
    assert [(g.gpu_index, g.uuid) for g in ours] == [
        (0, "GPU-0a"),
        (1, "GPU-1b"),
        (2, "GPU-2c"),
        (3, "GPU-7b"),
    ]
    assert len(history.gpus) == 9
    assert all(g.name == "NVIDIA A100-SXM4-80GB" for g in history.gpus)
    for g in history.gpus:
        assert len(g.samples) >= SCRAPES / STEP_S - 1
        # each sample stands for the part of its step the data covers (issue 30: partial edge steps),
        # all inside the window and never more than the window
        assert all(0 < s.interval_s <= STEP_S + 1e-9 for s in g.samples)
        assert all(
            history.start_unix_s <= s.time_unix_s - s.interval_s + 1e-6
            and s.time_unix_s <= history.end_unix_s + 1e-6
            for s in g.samples
        )
        assert sum(s.interval_s for s in g.samples) <= history.end_unix_s - history.start_unix_s + 1e-6
        assert [s.time_unix_s for s in g.samples] == sorted(s.time_unix_s for s in g.samples)


def test_gpuwise_exporter_busy_memory_power_throttle_energy(history, fleet):
    fake = fleet[3]
    busy, idle, throttled = (by_uuid(history, u) for u in ("GPU-0a", "GPU-1b", "GPU-2c"))
    for series, pct, used_gib, watts in [(busy, 97, 66, 342), (idle, 0, 0.5, 61), (throttled, 99, 66, 399)]:
        measured = [s for s in series.samples if s.busy_pct is not None]
        assert measured and all(s.busy_pct == pytest.approx(pct) for s in measured)
        assert all(s.memory_used_bytes == used_gib * GiB for s in measured)
        assert all(s.memory_total_bytes == 80 * GiB for s in measured)
        assert all(s.power_w == pytest.approx(watts) for s in measured)
        assert not any(s.lost for s in series.samples)
    assert all(s.throttle_s == {} for s in busy.samples)
    # a reason active in every sample holds the whole covered part of each step
    assert all(s.throttle_s == {"gpu_idle": pytest.approx(s.interval_s)} for s in idle.samples)
    hot = ("sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown")
    assert all(s.throttle_s == {r: pytest.approx(s.interval_s) for r in hot} for s in throttled.samples)
    # the fake's energy counter grows 1 J per read of GPU 0: a whole number of reads, never decreasing
    energy = [s.energy_j for s in busy.samples]
    reads = [e - 912_345.678 for e in energy]  # type: ignore[operator]
    assert reads == sorted(reads) and reads[0] >= 0 and reads[-1] <= fake.samples[0]
    assert all(r == pytest.approx(round(r), abs=1e-6) for r in reads)
    assert busy.sources["busy_pct"].startswith("gpuwise_gpu_busy_ratio (gpuwise exporter, ratio;")
    assert "gpuwise_gpu_clock_event_reason" in busy.sources["throttle_s"]
    (proc,) = busy.processes
    assert proc.pid == 4242 and proc.samples[-1].gpu_memory_bytes == int(65.5 * GiB)
    assert proc.samples[-1].sm_pct == pytest.approx(88)
    hours, mean_busy = summary([busy, idle, throttled])
    assert mean_busy == pytest.approx((97 + 0 + 99) / 3, abs=1.0)
    assert hours == pytest.approx(
        sum(s.interval_s for g in (busy, idle, throttled) for s in g.samples) / 3600
    )


def test_a_lost_gpu_is_lost_with_no_readings(history):
    lost = by_uuid(history, "GPU-7b")
    assert lost.samples[-1].lost and lost.samples[-1].busy_pct is None
    assert lost.samples[-1].memory_used_bytes is None and lost.samples[-1].throttle_s == {}
    assert not by_uuid(history, "GPU-0a").samples[-1].lost


def test_dcgm_exporter_units_and_clock_event_bitmask(history, fleet):
    busy, idle, throttled = (by_uuid(history, f"DCGM-{u}") for u in ("GPU-0a", "GPU-1b", "GPU-2c"))
    for series, pct, used_gib, watts in [(busy, 97, 66, 342), (idle, 0, 0.5, 61), (throttled, 99, 66, 399)]:
        assert all(s.busy_pct == pytest.approx(pct) for s in series.samples)
        assert all(s.sm_active_pct == pytest.approx(pct * 0.5) for s in series.samples)
        assert all(s.memory_used_bytes == used_gib * GiB for s in series.samples)
        assert all(s.memory_total_bytes == 80 * GiB for s in series.samples)
        assert all(s.power_w == pytest.approx(watts) for s in series.samples)
    # The mask is sampled 10 times a step (a subquery): the first step may end before the first such
    # sample falls after the exporter's first scrape, and then tells no reason.
    assert all(s.throttle_s == {} for s in busy.samples)
    assert all(s.throttle_s == {"gpu_idle": pytest.approx(s.interval_s)} for s in idle.samples[1:])
    reasons = ("sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown")
    assert all(
        s.throttle_s == {r: pytest.approx(s.interval_s) for r in reasons} for s in throttled.samples[1:]
    )
    first = throttled.samples[0]
    assert first.throttle_s in ({}, {r: pytest.approx(first.interval_s) for r in reasons})
    energy = [s.energy_j for s in busy.samples]  # mJ -> J; +1 J per scrape
    assert energy == sorted(energy) and energy[0] >= 912_345.678
    assert energy[-1] <= 912_345.678 + fleet[4][0] + 1e-6  # interpolated at the end: float rounding
    assert (
        busy.sources["memory_used_bytes"] == "DCGM_FI_DEV_FB_USED (dcgm-exporter, MiB; mean over each step)"
    )
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in busy.sources["throttle_s"]


def test_nvitop_exporter_scraped_twice_and_what_it_cannot_tell(history):
    busy, idle = by_uuid(history, "NVITOP-GPU-0a"), by_uuid(history, "NVITOP-GPU-1b")
    assert all(s.busy_pct == 97 and s.memory_used_bytes == 66 * GiB for s in busy.samples)
    assert all(s.busy_pct == 0 and s.memory_total_bytes == 80 * GiB for s in idle.samples)
    assert all(s.energy_j is None and s.throttle_s == {} for s in busy.samples)
    assert "energy_j" not in busy.sources and "throttle_s" not in busy.sources
    assert any("nvitop-exporter: no metric for energy_j, throttle_s" in n for n in history.notes)
    (proc,) = busy.processes
    assert (proc.pid, proc.user, proc.name) == (4242, "alice", None)
    assert proc.samples[-1].gpu_memory_bytes == int(65.5 * GiB) and proc.samples[-1].sm_pct == 88


def test_chunked_range_queries_give_the_same_history(fleet, history, monkeypatch):
    url, start, end, _fake, _ = fleet
    # the counter at `end` is interpolated between the samples around it (issue 30): once every energy
    # series holds a sample after `end`, later scrapes cannot move it, and both reads see the same value
    # (a busy CI machine once read `whole` before that sample was in, and `chunked` after)
    wait_for_sample_after(url, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 3, end)
    wait_for_sample_after(url, "gpuwise_gpu_energy_joules_total", 3, end)
    whole = load_history(url, start, end, STEP_S)
    monkeypatch.setattr(prometheus_http, "MAX_POINTS_PER_SERIES", 3)
    chunked = load_history(url, start, end, STEP_S)
    assert [g.samples for g in chunked.gpus] == [g.samples for g in whole.gpus]


def test_a_window_without_gpu_metrics_is_one_clear_line(fleet):
    url = fleet[0]
    with pytest.raises(
        GpuwiseError, match="holds no GPU metrics in this window: looked for gpuwise_gpu_busy"
    ) as e:
        load_history(url, 1e9, 1e9 + 3600, 60)
    assert "\n" not in str(e.value)


def test_chunks_cover_the_window_at_whole_steps_within_the_limits():
    cuts = prometheus_http.chunks(0.0, 100_000.0, 1.0, series=500)
    assert cuts[0][0] == 0.0 and cuts[-1][1] == 100_000.0
    assert all(b[0] == a[1] + 1.0 for a, b in itertools.pairwise(cuts))
    assert all(hi - lo + 1 <= 2000 for lo, hi in cuts)  # 1 M points / 500 series
    assert prometheus_http.chunks(0.0, 30.0, 10.0, series=1) == [(0.0, 30.0)]


@pytest.mark.parametrize(
    "status, body, expected",
    [
        (200, b"<html>hello</html>", "did not answer as a Prometheus API does"),
        (404, b"not found", "HTTP 404"),
        (401, b"Unauthorized", "refused the credentials (HTTP 401); set GPUWISE_PROMETHEUS_TOKEN"),
        (400, b'{"status":"error","errorType":"bad_data","error":"parse error"}', "bad_data: parse error"),
    ],
)
def test_a_server_that_is_not_a_working_prometheus_is_one_clear_line(status, body, expected, monkeypatch):
    monkeypatch.setenv("GPUWISE_PROMETHEUS_TOKEN", "s3cret-token")
    with text_server(lambda: body, status=status) as where, pytest.raises(GpuwiseError) as e:
        load_history(f"http://user:pw@{where}/", 0, 60, 15)
    message = str(e.value)
    assert re.search(re.escape(expected), message), message
    assert "\n" not in message and "s3cret" not in message and "pw@" not in message
    assert f"Prometheus at http://{where}" in message


def test_credentials_come_from_the_environment(monkeypatch):
    seen: list[str] = []
    with text_server(lambda: b"{}", status=401, authorization=seen) as where:
        monkeypatch.setenv("GPUWISE_PROMETHEUS_USER", "ops")
        monkeypatch.setenv("GPUWISE_PROMETHEUS_PASSWORD", "pw")
        with pytest.raises(GpuwiseError):
            load_history(f"http://{where}", 0, 60, 15)
        monkeypatch.setenv("GPUWISE_PROMETHEUS_TOKEN", "tok")  # a token wins over user and password
        with pytest.raises(GpuwiseError):
            load_history(f"http://{where}", 0, 60, 15)
    assert seen == ["Basic " + base64.b64encode(b"ops:pw").decode(), "Bearer tok"]


def test_a_server_that_never_answers_times_out_in_one_line():
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(GpuwiseError, match=r"did not answer within 0.5 s|timed out") as e:
            load_history(f"http://127.0.0.1:{port}", 0, 60, 15, timeout_s=0.5)
    assert "\n" not in str(e.value)


def test_an_unreachable_prometheus_and_a_bad_url_are_one_clear_line():
    port = free_port()
    with pytest.raises(GpuwiseError, match=f"cannot reach Prometheus at http://127.0.0.1:{port}: .*refused"):
        load_history(f"http://127.0.0.1:{port}", 0, 60, 15)
    with pytest.raises(GpuwiseError, match="expected http"):
        load_history("prom:9090", 0, 60, 15)
    with pytest.raises(GpuwiseError, match="step must be a positive"):
        load_history("http://127.0.0.1:9", 0, 60, 0)
    with pytest.raises(GpuwiseError, match="at least one step of 15 s"):
        load_history("http://127.0.0.1:9", 0, 10, 15)
