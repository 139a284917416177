"""`monitor report --prometheus` on exact sample times (issue 30 item 1): a real Prometheus (Debian's
binary) over a TSDB backfilled with the real `promtool tsdb create-blocks-from openmetrics` from a
scripted dcgm-exporter history, so every sample time is known and every figure is hand arithmetic.

Window (S, E], E a scrape time, 447 s long, step 60 s: points at E - 420 .. E (the first one's step holds
S: a partial edge step of 27 s). GPU A is scraped every 15 s from before S to after E at 50 % busy; GPU B
only from S + 100.5 to S + 295.5 (its data starts and stops inside steps), idle. Both draw 300 W and
their energy counters (mJ) rise at 300 W."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from gpuwise.finops.analyze import Prices, analyze
from gpuwise.finops.prometheus_source import MAX_STEPS, default_step_s, load_history
from prometheus_server import prometheus

WATTS = 300.0
SCRAPE_S = 15.0
WINDOW_S = 447.0
STEP_S = 60.0
E = (int(time.time()) // 3600 - 2) * 3600.0  # two whole hours ago: inside any retention, in the past
S = E - WINDOW_S
GPUS = {  # uuid -> (index, busy %, scrape times)
    "GPU-aaaa": (0, 50.0, [E - SCRAPE_S * k for k in range(40, -3, -1)]),  # S - 153 .. E + 30
    "GPU-bbbb": (1, 0.0, [S + 100.5 + SCRAPE_S * k for k in range(14)]),  # S + 100.5 .. S + 295.5
}


def _openmetrics() -> str:
    families = {
        "DCGM_FI_DEV_GPU_UTIL": lambda busy, t: busy,
        "DCGM_FI_DEV_FB_USED": lambda busy, t: 40960,
        "DCGM_FI_DEV_FB_FREE": lambda busy, t: 40960,
        "DCGM_FI_DEV_POWER_USAGE": lambda busy, t: WATTS,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": lambda busy, t: 1e9 + WATTS * 1000 * (t - S),
    }
    lines = []
    for metric, value in families.items():
        lines.append(f"# TYPE {metric} gauge")
        for uuid, (index, busy, times) in GPUS.items():
            labels = f'gpu="{index}",UUID="{uuid}",modelName="NVIDIA A100-SXM4-80GB",Hostname="node1"'
            lines += [f"{metric}{{{labels}}} {value(busy, t):.3f} {t:.3f}" for t in times]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool: .ci/run installs Debian's prometheus (apt-get install prometheus)")
    tmp = tmp_path_factory.mktemp("backfill")
    source = tmp / "history.om"
    source.write_text(_openmetrics())
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tmp / "tsdb")],
                   check=True, capture_output=True)  # fmt: skip
    with prometheus([], tmp) as where:
        yield where


def test_partial_edge_steps_count_only_their_covered_seconds(url):
    history = load_history(url, S, E, STEP_S)
    a, b = sorted(history.gpus, key=lambda g: g.gpu_index)
    # A covers the whole window: 447 s (whole steps would say 8 x 60 = 480 s, +7.4 %)
    assert sum(s.interval_s for s in a.samples) == pytest.approx(WINDOW_S)
    assert a.samples[0].interval_s == pytest.approx(27.0)  # (S, E - 420]
    assert a.samples[-1].time_unix_s == pytest.approx(E)
    # B: first sample S + 100.5 to last S + 295.5 = 195 s: steps of 46.5 + 60 + 60 + 28.5 s
    assert [round(s.interval_s, 3) for s in b.samples] == [46.5, 60.0, 60.0, 28.5]


def test_the_report_prices_and_energies_are_hand_arithmetic(url):
    report = analyze(load_history(url, S, E, STEP_S), Prices(3.6, 0.10, "test"))
    a, b = sorted(report.gpus, key=lambda g: g.gpu_index)
    assert a.observed_hours * 3600 == pytest.approx(447.0) and a.usd == pytest.approx(0.447)
    assert b.observed_hours * 3600 == pytest.approx(195.0) and b.idle_usd == pytest.approx(0.195)
    # energy from the counter across the first (partial) step too: 300 W x 447 s, interpolated at S
    assert a.energy_kwh * 3.6e6 == pytest.approx(WATTS * 447.0)
    # B from its first sample to its last: 300 W x 195 s
    assert b.energy_kwh * 3.6e6 == pytest.approx(WATTS * 195.0)
    assert a.busy_mean_pct == pytest.approx(50.0) and b.idle_hours * 3600 == pytest.approx(195.0)


def test_until_picks_an_earlier_window_and_its_edges(url):
    # (S + 100, S + 200]: A 100 s; B from its first sample S + 100.5 to S + 200 = 99.5 s
    report = analyze(load_history(url, S + 100, S + 200, STEP_S), Prices(3.6, 0.10, "test"))
    a, b = sorted(report.gpus, key=lambda g: g.gpu_index)
    assert a.observed_hours * 3600 == pytest.approx(100.0)
    assert b.observed_hours * 3600 == pytest.approx(99.5)
    assert a.energy_kwh * 3.6e6 == pytest.approx(WATTS * 100.0)


def test_the_default_step_stays_bounded_beyond_8_days():
    assert default_step_s(7 * 86400) == 60.0 and default_step_s(8 * 86400) == 60.0
    assert default_step_s(30 * 86400) == 225.0  # 30 days / 11,520 steps
    assert 30 * 86400 / default_step_s(30 * 86400) <= MAX_STEPS


def test_the_cli_takes_since_and_until(url, capfd):
    import json

    from test_monitor import run_cli

    until = f"{S + 200:.3f}"
    args = ["monitor", "report", "--prometheus", url, "--since", "100s", "--until", until, "--step", "60s"]
    code, out, err = run_cli(capfd, *args, "--usd-per-gpu-hour", "3.6", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["start_unix_s"], data["end_unix_s"]) == (S + 100, S + 200)
    assert data["totals"]["observed_hours"] * 3600 == pytest.approx(100.0 + 99.5)
    code, _, err = run_cli(capfd, "monitor", "report", "--prometheus", url, "--until", "yesterday-ish")
    assert code == 2 and err.count("\n") == 1 and "--until: 'yesterday-ish' is neither" in err
