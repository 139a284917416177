"""`gpuwise monitor report`: faked NVML scenarios (idle, throttled, no energy counter) recorded through the
real recorder into real SQLite and reported through the real CLI; the attribution, energy and history
rules on `History` objects built by hand (the report reads only these types, whoever filled them)."""

from __future__ import annotations

import json
import sys

import pytest
from test_monitor_history import T0, record, run_cli

from gpuwise.diagnose.engine import diagnose
from gpuwise.diagnose.evidence import Evidence
from gpuwise.finops.analyze import Prices, analyze
from gpuwise.monitor.energy import interval_energy_j
from gpuwise.monitor.series import GpuSample, GpuSeries, History, ProcessSample, ProcessSeries
from gpuwise.monitor.tiers import Retention
from gpuwise.store.history import HistoryStore
from gpuwise.units import GiB

PRICES = Prices(2.0, 0.10, "test")


def recorded(tmp_path, scenario: str, hours: float = 2.0):
    """``hours`` of ``scenario`` at one sample per 10 s, recorded so it ends now (the report's window)."""
    import time

    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    ticks = int(hours * 360)
    rec = record(store, scenario, ticks, 10.0, Retention(1800, 30 * 86400, None))
    shift = time.time() - (T0 + ticks * 10.0)
    for table in ("samples", "proc_samples"):  # move the recording to end now (keeps every row's spacing)
        store.conn.execute(
            f"UPDATE {table} SET t_ms = t_ms + ?", (int(shift * 1000) // 3_600_000 * 3_600_000,)
        )
    store.close()
    return tmp_path / "monitor.sqlite", rec


def report_json(capfd, path, *args: str) -> dict:
    code, out, err = run_cli(
        capfd, "monitor", "report", "--store", str(path), "--since", "1d", "--json", *args
    )
    assert code == 0, err
    return json.loads(out)


def test_an_idle_gpu_costs_its_idle_hours_and_the_rule_engine_says_so(tmp_path, capfd):
    path, _ = recorded(tmp_path, "healthy_and_idle")
    data = report_json(capfd, path, "--usd-per-gpu-hour", "2", "--usd-per-kwh", "0.1")
    assert data["kind"] == "monitor_report"
    busy, idle = data["gpus"]
    assert idle["idle_hours"] == pytest.approx(2.0, abs=0.01) and idle["idle_usd"] == pytest.approx(
        4.0, abs=0.03
    )
    assert busy["idle_hours"] == 0 and busy["busy_in_use_pct"] == pytest.approx(97.0)
    assert idle["busy_hours"]["idle < 5 %"] == pytest.approx(2.0, abs=0.01)
    assert idle["headroom_hours"]["> 50 %"] == pytest.approx(2.0, abs=0.01)
    assert {f["id"] for f in idle["findings"]} >= {"idle_gpu_hours"}
    assert not {f["id"] for f in busy["findings"]} & {"idle_gpu_hours", "oversized_gpu"}
    assert data["totals"]["idle_usd"] == pytest.approx(4.0, abs=0.03)
    # the report's findings: one per id, naming the GPUs (host:index) with each one's own figures
    (fleet_idle,) = [f for f in data["findings"] if f["id"] == "idle_gpu_hours"]
    label = f"{idle['hostname']}:{idle['gpu_index']}"
    assert [g["gpu"] for g in fleet_idle["metrics"]["gpus"]] == [label]
    assert fleet_idle["summary"].startswith(f"{label}: ")
    # energy from the counter (the fake's rises 1 J per sample), priced at --usd-per-kwh
    assert "total-energy counter" in busy["energy_source"]
    assert busy["energy_kwh"] == pytest.approx((2 * 360 - 1) / 3.6e6, rel=0.01)
    # who: the busy GPU's hours go to its process, the idle GPU's to "no process"
    assert [p["process"] for p in busy["processes"]] == ["4242 n/a"]
    assert idle["processes"][0]["process"] == "no process" and idle["processes"][0][
        "idle_usd"
    ] == pytest.approx(4.0, abs=0.03)


def test_a_throttled_gpu_has_its_throttled_time_by_reason_and_the_throttling_finding(tmp_path, capfd):
    path, _ = recorded(tmp_path, "throttled", hours=1.5)
    data = report_json(capfd, path)
    (gpu,) = data["gpus"]
    for reason in ("sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown"):
        assert gpu["throttle_hours"][reason] == pytest.approx(1.5, abs=0.01)
    assert gpu["kpi_pct"]["not_throttled"] == pytest.approx(0.0, abs=0.5)
    assert "throttling" in {f["id"] for f in gpu["findings"]}
    assert gpu["price_source"].startswith("catalog on-demand")


def test_a_gpu_without_an_energy_counter_says_its_energy_came_from_sampled_power(tmp_path, capfd):
    path, _ = recorded(tmp_path, "unsupported", hours=1.0)
    (gpu,) = report_json(capfd, path)["gpus"]
    assert "sampled power" in gpu["energy_source"]
    assert gpu["energy_kwh"] == pytest.approx(0.342, rel=0.01)  # 342 W for one hour
    # no catalog entry for this GeForce and no --usd-per-gpu-hour: no dollars, and the report says why
    assert gpu["catalog_id"] is None and gpu["usd"] is None and "--usd-per-gpu-hour" in gpu["price_source"]


def test_terminal_markdown_and_html_views(tmp_path, capfd):
    path, _ = recorded(tmp_path, "healthy_and_idle", hours=1.0)
    code, out, _ = run_cli(capfd, "monitor", "report", "--store", str(path), "--since", "1d")
    assert (
        code == 0 and "idle GPU-hours" in out and "idle_gpu_hours" in out and "Busy-time distribution" in out
    )
    code, out, _ = run_cli(capfd, "monitor", "report", "--store", str(path), "--markdown")
    assert code == 0 and "| GPU |" in out and "KPI compliance" in out
    html = tmp_path / "report.html"
    code, _, err = run_cli(capfd, "monitor", "report", "--store", str(path), "--html", str(html))
    assert code == 0 and "HTML report written" in err
    text = html.read_text()
    assert "<svg" in text and "Busy % over the window" in text and "<script" not in text
    assert "Throttled time" not in out  # the idle GPU's gpu_idle clock reason is not throttling


def test_prometheus_without_its_loader_is_one_line(capfd, monkeypatch):
    monkeypatch.setitem(sys.modules, "gpuwise.finops.prometheus_source", None)
    code, out, err = run_cli(capfd, "monitor", "report", "--prometheus", "http://127.0.0.1:9")
    assert code == 2 and out == "" and err.count("\n") == 1 and "prometheus_source" in err


def _series(hours: float, busy: float, step_s: float = 60.0, **extra) -> GpuSeries:
    n = int(hours * 3600 / step_s)
    samples = [
        GpuSample(T0 + (i + 1) * step_s, step_s, busy_pct=busy, memory_used_bytes=10 * GiB,
                  memory_total_bytes=80 * GiB, energy_j=1000.0 + 300 * step_s * i)
        for i in range(n)
    ]  # fmt: skip
    return GpuSeries("h", 0, "GPU-x", "NVIDIA A100-SXM4-80GB", samples, **extra)


def _history(*series: GpuSeries) -> History:
    return History(T0, T0 + 48 * 3600, list(series), "test")


def test_a_day_of_low_busy_is_chronic_and_asks_for_pipeline_fixes_before_hardware():
    report = analyze(_history(_series(48, busy=40.0)), PRICES)
    ids = {f.id for f in report.gpus[0].findings}
    assert "chronic_low_busy" in ids and "idle_gpu_hours" not in ids
    assert "oversized_gpu" in ids  # 10 of 80 GiB at the peak: a cheaper, smaller GPU holds it
    smaller = next(f for f in report.gpus[0].findings if f.id == "oversized_gpu").metrics["smaller_gpu"]
    assert smaller["usd_per_gpu_hour"] < 2.0 and smaller["usd_saved"] == pytest.approx(
        (2.0 - smaller["usd_per_gpu_hour"]) * 48, rel=1e-6
    )
    short = analyze(_history(_series(6, busy=40.0)), PRICES)
    assert "chronic_low_busy" not in {f.id for f in short.gpus[0].findings}  # a slow afternoon is not a habit


def test_history_rules_fire_only_on_their_own_fields():
    assert diagnose(Evidence.flat(source="telemetry", idle_time_pct=90.0)) == []  # no hours: no verdict
    found = diagnose(
        Evidence.flat(source="telemetry", idle_time_pct=60.0, observed_gpu_hours=10, idle_usd=12.0)
    )
    assert [f.id for f in found] == ["idle_gpu_hours"] and found[0].severity == "high"
    assert "$12.00" in found[0].summary and "MIG" in found[0].fix


def test_processes_share_a_gpu_by_sm_share_and_users_sum_their_processes():
    base = _series(1, busy=50.0)
    times = [s.time_unix_s for s in base.samples]
    a = ProcessSeries(1, "alice", "train", [ProcessSample(t, 60.0, 8 * GiB, 75.0) for t in times])
    b = ProcessSeries(2, "bob", "eval", [ProcessSample(t, 60.0, 2 * GiB, 25.0) for t in times])
    c = ProcessSeries(3, "alice", "notebook", [ProcessSample(t, 60.0, 1 * GiB, None) for t in times[:30]])
    series = GpuSeries("h", 0, "GPU-x", base.name, base.samples, [a, b])
    report = analyze(_history(series), PRICES)
    procs = report.gpus[0].processes
    assert procs["1 train"].gpu_hours == pytest.approx(0.75) and procs["2 eval"].gpu_hours == pytest.approx(
        0.25
    )
    assert procs["1 train"].busy_gpu_hours == pytest.approx(0.375) and procs["1 train"].usd == pytest.approx(
        1.5
    )
    # a process without an SM share: the interval is split by memory held instead
    series = GpuSeries("h", 0, "GPU-x", base.name, base.samples, [a, c])
    procs = analyze(_history(series), PRICES).gpus[0].processes
    assert procs["3 notebook"].gpu_hours == pytest.approx(0.5 * 1 / 9)
    users = analyze(_history(series), PRICES).users
    assert users["alice"].gpu_hours == pytest.approx(1.0)


def test_energy_skips_a_counter_reset_and_a_gap_instead_of_guessing():
    s = [
        GpuSample(T0 + 1, 1, energy_j=100.0),
        GpuSample(T0 + 2, 1, energy_j=400.0),
        GpuSample(T0 + 3, 1, energy_j=5.0),  # driver reload: the counter restarted
        GpuSample(T0 + 4, 1, energy_j=305.0),
        GpuSample(T0 + 5, 1, lost=True),
        GpuSample(T0 + 6, 1, energy_j=900.0),
        GpuSample(T0 + 60, 1, energy_j=950.0),  # the recorder was stopped in between
        GpuSample(T0 + 120, 60, energy_j=None, energy_delta_j=42.0),  # a tier's own delta
    ]
    assert interval_energy_j(s) == [None, 300.0, None, 300.0, None, None, None, 42.0]


def test_a_process_present_part_of_a_bucket_is_charged_that_part_only():
    hour = GpuSample(T0 + 3600, 3600.0, busy_pct=50.0, memory_used_bytes=GiB, memory_total_bytes=80 * GiB)
    job = ProcessSeries(7, "dana", "train", [ProcessSample(T0 + 3600, 900.0, GiB, 90.0)])  # 15 min of 60
    series = GpuSeries("h", 0, "GPU-x", "NVIDIA A100-SXM4-80GB", [hour], [job])
    procs = analyze(_history(series), PRICES).gpus[0].processes
    assert procs["7 train"].gpu_hours == pytest.approx(0.25)
    assert procs["no process"].gpu_hours == pytest.approx(0.75)


def _gpu(
    index: int, busy: float, idle_h: float = 0.0, busy_h: float = 24.0, peak_gib: float = 10.0
) -> GpuSeries:
    """``idle_h`` idle hours then ``busy_h`` hours at ``busy`` %, one sample a minute, on an A100-80GB."""
    samples = [
        GpuSample(T0 + (i + 1) * 60.0, 60.0, busy_pct=0.0 if i < idle_h * 60 else busy,
                  memory_used_bytes=int(peak_gib * GiB), memory_total_bytes=80 * GiB)
        for i in range(int((idle_h + busy_h) * 60))
    ]  # fmt: skip
    return GpuSeries("node", index, f"GPU-{index}", "NVIDIA A100-SXM4-80GB", samples)


def _one(report, finding_id: str):
    (found,) = [f for f in report.findings if f.id == finding_id]  # one per id, however many GPUs
    return found


def test_some_idle_gpus_make_one_finding_naming_exactly_them_with_the_summed_dollars():
    gpus = [_gpu(0, 90.0), _gpu(1, 90.0, idle_h=6), _gpu(2, 90.0), _gpu(3, 90.0, idle_h=12)]
    report = analyze(_history(*gpus), PRICES)
    idle = _one(report, "idle_gpu_hours")
    assert [g["gpu"] for g in idle.metrics["gpus"]] == ["node:3", "node:1"]  # worst $ first
    assert idle.metrics["idle_usd"] == pytest.approx((6 + 12) * 2.0)
    assert idle.metrics["idle_gpu_hours"] == pytest.approx(18.0)
    assert "2 of 4 GPUs" in idle.summary and "$36.00" in idle.summary
    assert "node:3 ($24.00), node:1 ($12.00)" in idle.summary and "node:0" not in idle.summary
    assert idle.severity == "medium"  # 12 of 36 h and 6 of 30 h: both under FINOPS_IDLE_HIGH_PCT
    # the per-GPU findings are still each GPU's own
    assert [[f.id for f in g.findings if f.id == "idle_gpu_hours"] for g in report.gpus] == [
        [],
        ["idle_gpu_hours"],
        [],
        ["idle_gpu_hours"],
    ]


def test_many_idle_gpus_name_the_worst_few_and_count_the_rest():
    gpus = [_gpu(i, 90.0, idle_h=4 + i) for i in range(8)]  # 4 of 28 h idle (14 %) up to 11 of 35 h
    idle = _one(analyze(_history(*gpus), PRICES), "idle_gpu_hours")
    assert idle.summary.startswith("8 of 8 GPUs — node:7 ($22.00), node:6 ($20.00), node:5 ($18.00), ")
    assert "node:3 ($14.00) and 3 more:" in idle.summary and "node:0" not in idle.summary
    assert len(idle.metrics["gpus"]) == 8
    assert idle.metrics["idle_usd"] == pytest.approx(2.0 * sum(range(4, 12)))


def test_a_busy_a100_is_not_sent_to_a_gpu_that_cannot_keep_up():
    from gpuwise.catalog.gpus import get_gpu

    # an A100-80GB busy 73 % while in use with a 30 GiB peak: every cheaper, smaller GPU holding 30 GiB
    # would need more than the busy KPI (the A40: ~half the 16-bit TFLOPS, ~1/3 the bandwidth)
    report = analyze(_history(_gpu(0, 73.0, busy_h=48, peak_gib=30)), PRICES)
    found = _one(report, "oversized_gpu")
    fit = found.metrics["gpus"][0]["smaller_gpu"]
    assert fit["gpu"] is None and found.metrics["gpus"][0]["usd_saved"] == 0 and found.severity == "low"
    a100, a40 = get_gpu("a100-80gb-sxm"), get_gpu("a40")
    assert 73.0 * a100.mem_bw_tbps / a40.mem_bw_tbps > 200  # what the old memory-only rule proposed
    # the nearest miss is the A100-40GB: same tensor cores, 1.555 of 2.039 TB/s
    closest = fit["closest"]
    assert closest["gpu"] == "a100-40gb-sxm" and closest["limited_by"] == "memory bandwidth"
    assert closest["projected_busy_pct"] == pytest.approx(73.0 * 2.039 / 1.555)
    assert "no cheaper, smaller catalog GPU keeps up" in found.summary and "A40" not in found.summary
    assert "50.0 GiB free at the peak" in found.fix and "MIG" in found.fix


def test_a_light_a100_is_sent_to_the_cheapest_gpu_that_keeps_up_priced_over_its_in_use_hours_only():
    from gpuwise.catalog.gpus import get_gpu
    from gpuwise.catalog.prices import price

    report = analyze(_history(_gpu(0, 15.0, idle_h=24, busy_h=24, peak_gib=10)), PRICES)
    gpu = report.gpus[0]
    fit = next(f for f in gpu.findings if f.id == "oversized_gpu").metrics["smaller_gpu"]
    # the L4 is as cheap but has 0.3 TB/s: 15 % × 2.039 / 0.3 = 102 % busy; the A40 needs 15 × 2.93 = 44 %
    l4 = get_gpu("l4")
    assert 15.0 * 2.039 / l4.mem_bw_tbps > 80
    assert fit["gpu"] == "a40" and fit["projected_busy_pct"] == pytest.approx(15.0 * 2.039 / 0.696)
    a40_usd = price("a40", "on_demand").usd_per_gpu
    assert fit["usd_saved"] == pytest.approx((2.0 - a40_usd) * 24.0)  # in-use hours, not the 48 held
    summary = _one(report, "oversized_gpu").summary
    assert "The NVIDIA A40 (44.7 GiB" in summary and "a a40" not in summary and " GB" not in summary
    # idle $ and right-size $ never count the same hour: idle + in-use hours are the hours held
    idle = next(f for f in gpu.findings if f.id == "idle_gpu_hours")
    assert gpu.idle_hours + gpu.in_use_hours == pytest.approx(gpu.observed_hours)
    assert idle.metrics["idle_usd"] == pytest.approx(24 * 2.0)
    assert idle.metrics["idle_usd"] + fit["usd_saved"] <= gpu.usd


def test_fleet_right_sizing_sums_the_movable_gpus_and_counts_the_ones_to_fill():
    gpus = [_gpu(0, 15.0), _gpu(1, 15.0, idle_h=12), _gpu(2, 73.0, peak_gib=30)]
    found = _one(analyze(_history(*gpus), PRICES), "oversized_gpu")
    saved = [g["usd_saved"] for g in found.metrics["gpus"]]
    assert [g["gpu"] for g in found.metrics["gpus"]] == ["node:0", "node:1", "node:2"] and saved[2] == 0
    assert saved[0] == pytest.approx(saved[1]) and found.metrics["usd_saved"] == pytest.approx(sum(saved))
    assert "2 could move" in found.summary and "1 have no cheaper GPU" in found.summary
    assert "(nearest: the NVIDIA A100 SXM4 40GB, ~96 % busy by its memory bandwidth" in found.summary
    assert found.fix.startswith("Move node:0, node:1 to the NVIDIA A40 (`gpuwise plan --gpu a40`")
    assert "keep and fill node:2:" in found.fix
    assert found.severity == "medium"  # the most severe of the three


def test_a_fleet_report_shows_the_gpus_that_waste_most_and_says_how_many_it_left_out():
    from gpuwise.report.document import Table
    from gpuwise.report.finops_view import MAX_GPU_ROWS, document

    # 30 GPUs, GPU i idle i/2 hours: the table keeps the 24 with the most idle $ (29 down to 6)
    gpus = [_gpu(i, 90.0, idle_h=i / 2, busy_h=2.0) for i in range(MAX_GPU_ROWS + 6)]
    report = analyze(_history(*gpus), PRICES)
    tables = [b for b in document(report).blocks if isinstance(b, Table)]
    main = tables[0]
    assert [row[0] for row in main.rows] == [f"node:{i}" for i in range(29, 5, -1)]
    assert f"the {MAX_GPU_ROWS} of 30 GPUs with the most idle $ (--json lists every GPU)" in main.caption
    assert len(report.gpus) == 30  # the report itself (and its --json) keeps every GPU
