"""An idle GPU whose memory is held (issue 25, issue 30): a FinOps finding naming who holds it, how long and
what it costs, never an oom_risk with training advice; findings merged across GPUs name each GPU."""

from __future__ import annotations

from gpuwise.diagnose.finding import Finding
from gpuwise.finops.analyze import Prices, analyze
from gpuwise.finops.fleet_findings import group
from gpuwise.monitor import kpi
from gpuwise.monitor.reading import GpuProcess, GpuReading
from gpuwise.monitor.sampler import Snapshot
from gpuwise.monitor.series import GpuSample, GpuSeries, History, ProcessSample, ProcessSeries
from gpuwise.report import markdown, monitor_view
from gpuwise.units import GiB

T0 = 472_222 * 3600.0
A100 = "NVIDIA A100-SXM4-80GB"


def _reading(index: int, busy: float, used_gib: float, processes=(), reasons=None) -> GpuReading:
    return GpuReading(
        index,
        name=A100,
        busy_pct=busy,
        memory_used_bytes=int(used_gib * GiB),
        memory_total_bytes=80 * GiB,
        processes=list(processes),
        throttle_reasons=reasons,
    )


def test_an_idle_sample_holding_75_gib_is_a_cost_naming_the_holders_not_an_oom_risk():
    r = _reading(
        0,
        busy=0.0,
        used_gib=75.0,
        processes=[
            GpuProcess(4242, "bob", "python", 70 * GiB),
            GpuProcess(5151, "eve", "jupyter", 5 * GiB),
        ],
    )
    verdict = kpi.check(r, "a100-sxm4-80gb", usd_per_gpu_hour=2.0)
    ids = [f.id for f in verdict.findings]
    assert ids == ["idle_memory_held"]
    held = verdict.findings[0]
    assert held.summary.index("4242 python (bob, 70.0 GiB)") < held.summary.index(
        "5151 jupyter (eve, 5.0 GiB)"
    )
    assert "$2.00 per hour" in held.summary and "75.0 of 80.0 GiB" in held.summary
    assert held.metrics["holders"][0]["user"] == "bob" and held.metrics["idle_memory_held_hours"] is None
    assert {b.kpi: b.finding_id for b in verdict.breaches}["headroom"] == "idle_memory_held"
    # the same GPU busy: memory near full is an OOM risk again, in neutral words (a monitor cannot tell
    # training from serving)
    busy = kpi.check(_reading(0, busy=90.0, used_gib=75.0), "a100-sxm4-80gb", usd_per_gpu_hour=2.0)
    oom = {f.id: f for f in busy.findings}["oom_risk"]
    assert "checkpointing" not in oom.fix + oom.fix_snippet and "accumulation" not in oom.fix
    # an idle GPU with only a context (0.5 GiB) holds nothing worth a finding
    assert kpi.check(_reading(0, busy=0.0, used_gib=0.5), "a100-sxm4-80gb").findings == []


def _series(index: int, busy: float, used_gib: float, hours: float, processes=()) -> GpuSeries:
    step = 60.0
    samples = [
        GpuSample(T0 + (i + 1) * step, step, busy_pct=busy, memory_used_bytes=int(used_gib * GiB),
                  memory_total_bytes=80 * GiB)
        for i in range(int(hours * 3600 / step))
    ]  # fmt: skip
    return GpuSeries("h", index, f"GPU-{index}", A100, samples, list(processes))


def test_history_of_an_idle_gpu_held_by_another_user_prices_the_held_hours():
    times = [T0 + (i + 1) * 60.0 for i in range(120)]
    notebook = ProcessSeries(777, "carol", "jupyter", [ProcessSample(t, 60.0, 75 * GiB, None) for t in times])
    report = analyze(
        History(
            T0, T0 + 2 * 3600, [_series(0, busy=0.0, used_gib=75.0, hours=2.0, processes=[notebook])], "t"
        ),
        Prices(2.0, 0.1, "test"),
    )
    findings = {f.id: f for f in report.gpus[0].findings}
    assert "oom_risk" not in findings  # the issue-30 case: it used to be a HIGH oom_risk
    held = findings["idle_memory_held"]
    assert held.severity == "high"  # held 100 % of the window
    assert held.metrics["idle_memory_held_hours"] == 2.0 and held.metrics["idle_memory_held_usd"] == 4.0
    assert "777 jupyter (carol, 75.0 GiB, 2.0 h idle, $4.00)" in held.summary
    assert "for 2.0 of 2.0 h: $4.00" in held.summary
    # the fleet finding names the GPU
    (fleet,) = [f for f in report.findings if f.id == "idle_memory_held"]
    assert fleet.summary.startswith("h:0: ")


def test_a_busy_history_near_full_memory_is_still_an_oom_risk_from_its_in_use_peak():
    report = analyze(
        History(T0, T0 + 2 * 3600, [_series(0, busy=90.0, used_gib=76.0, hours=2.0)], "t"),
        Prices(2.0, 0.1, "t"),
    )
    ids = {f.id for f in report.gpus[0].findings}
    assert "oom_risk" in ids and "idle_memory_held" not in ids


def _throttled(reasons: dict[str, float]) -> Finding:
    verdict = kpi.check(
        _reading(0, busy=90.0, used_gib=40.0, reasons=list(reasons)), "a100-sxm4-80gb", usd_per_gpu_hour=2.0
    )
    return {f.id: f for f in verdict.findings}["throttling"]


def test_a_merged_throttling_finding_names_each_gpu_and_its_own_reason():
    power, thermal = _throttled({"sw_power_cap": 100}), _throttled({"hw_thermal_slowdown": 100})
    (merged,) = group([("node:0", power), ("node:1", thermal)], 2)
    assert merged.title == "GPUs slow their clocks (power / thermal limit)"
    assert "node:0 (sw_power_cap 100 %)" in merged.summary
    assert "node:1 (hw_thermal_slowdown 100 %)" in merged.summary
    assert [g["gpu"] for g in merged.metrics["gpus"]] == ["node:0", "node:1"]


def test_the_snapshot_view_names_the_gpus_a_finding_is_about():
    gpus = [
        _reading(0, busy=90.0, used_gib=40.0, reasons=["sw_power_cap"]),
        _reading(1, busy=90.0, used_gib=40.0, reasons=["hw_thermal_slowdown"]),
        _reading(2, busy=0.0, used_gib=60.0, processes=[GpuProcess(9, "dan", "python", 60 * GiB)]),
    ]
    snap = Snapshot(T0, "h", "550.54", gpus)
    found = kpi.verdicts(snap, 2.0)
    text = markdown.render(monitor_view.document(snap, found, kpi.cost(snap, found, 2.0)))
    assert "2 of 3 GPUs — GPU 0 (sw_power_cap 100 %), GPU 1 (hw_thermal_slowdown 100 %)" in text
    assert "GPU 2: Busy < 5 %" in text and "9 python (dan, 60.0 GiB)" in text
