"""Issue 11 item 9: hypervisor steal time from /proc/stat, during the measured steps, read by
step_outliers as "the machine was busy". The parser reads fake files; the real file is read too."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.profile.analysis import build_run
from gpuwise.profile.telemetry import TelemetrySampler, read_cpu_jiffies, steal_pct

# user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user: not re-added)
WITH_STEAL = "cpu  1000 0 200 700 50 0 10 40 300 0\ncpu0 500 0 100 350 25 0 5 20 150 0\nintr 1 2 3\n"
LATER = "cpu  1300 0 250 900 50 0 10 240 300 0\n"  # +300 +50 +200 idle +200 steal: 750 jiffies
NO_STEAL_FIELD = "cpu  1000 0 200 700 50 0 10\n"  # a kernel (or emulation) without the steal column


def fake(tmp_path: Path, text: str) -> str:
    path = tmp_path / "stat"
    path.write_text(text)
    return str(path)


def test_parses_the_cpu_line_with_and_without_steal(tmp_path):
    assert read_cpu_jiffies(fake(tmp_path, WITH_STEAL)) == (2000, 40)
    assert read_cpu_jiffies(fake(tmp_path, NO_STEAL_FIELD)) == (1960, None)
    assert read_cpu_jiffies(str(tmp_path / "missing")) is None
    assert read_cpu_jiffies(fake(tmp_path, "intr 1 2\n")) is None


def test_steal_share_between_two_readings():
    assert steal_pct((2000, 40), (2750, 240)) == pytest.approx(100 * 200 / 750)
    assert steal_pct((2000, None), (2750, None)) is None
    assert steal_pct((2000, 40), (2000, 40)) is None  # no time passed: no share


def test_sampler_measures_steal_between_samples_and_says_na_without_the_field(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(WITH_STEAL)
    sampler = TelemetrySampler(interval_s=0.5, proc_stat=str(stat))
    sampler._prime()
    stat.write_text(LATER)
    assert sampler.sample_once()["cpu_steal_pct"] == pytest.approx(100 * 200 / 750)

    stat.write_text(NO_STEAL_FIELD)
    blind = TelemetrySampler(interval_s=0.5, proc_stat=str(stat))
    blind._prime()
    assert "cpu_steal_pct" not in blind.sample_once()
    assert blind.not_available["cpu_steal"].startswith("n/a")


def test_the_real_proc_stat_of_this_machine():
    reading = read_cpu_jiffies()
    if reading is None:
        pytest.skip("needs hardware: a Linux /proc/stat")
    total, steal = reading
    assert total > 0 and (steal is None or 0 <= steal <= total)
    sampler = TelemetrySampler(interval_s=0.5)
    sampler._prime()
    sample = sampler.sample_once()
    if steal is not None:
        assert 0.0 <= sample.get("cpu_steal_pct", 0.0) <= 100.0


def run_with(telemetry: dict) -> dict:
    """A run whose 40 steps of 100 ms have four scattered 500 ms stalls, with the given telemetry."""
    times = [0.1] * 40
    for i in (5, 13, 14, 29):
        times[i] = 0.5
    steps = [{"start_s": sum(times[:i]), "wall_s": t, "phase_s": {"forward": t}} for i, t in enumerate(times)]
    raw = {"status": "completed", "warmup": 0, "device": "cpu", "steps": steps, "telemetry": telemetry}
    return {f.id: f for f in build_run(raw).findings}


def test_steal_during_the_steps_makes_stalls_the_machines():
    stolen = run_with({"cpu_steal_pct": 25.0, "samples": 8})["step_outliers"]
    assert stolen.confidence == "low" and "steal" in stolen.summary and "quiet machine" in stolen.fix
    assert stolen.metrics["cpu_steal_pct"] == 25.0
    quiet = run_with({"cpu_steal_pct": 0.0, "samples": 8})["step_outliers"]
    assert quiet.metrics["machine_busy"] is None and "gc.freeze" in quiet.fix
