"""`gpuwise monitor --record`: the history store on real SQLite (WAL), its tiers and retention, a real
recorder process killed or stopped mid-run, a reader next to a live writer, a corrupt file; samples come
from faked NVML (tests/fake_nvml.py: no GPU here) through the real sampler and recorder."""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_monitor import run_cli

from conftest import BUSY_FACTOR
from fake_nvml import fake_nvml
from gpuwise.errors import GpuwiseError
from gpuwise.monitor.energy import interval_energy_j
from gpuwise.monitor.history_read import load_local_history, plan
from gpuwise.monitor.recorder import Recorder, ResilientSampler
from gpuwise.monitor.tiers import HOUR, MINUTE, RAW, Retention
from gpuwise.store.history import HistoryStore

CHILD = Path(__file__).parents[1] / "monitor_record_child.py"
T0 = 472_222 * 3600.0  # a whole hour (UTC), so buckets line up with the recording's start


def record(
    store: HistoryStore, scenario: str, ticks: int, step_s: float, retention: Retention, lost=(), offset_s=0.0
):
    """``ticks`` samples ``step_s`` apart from T0 (the snapshot's clock set, everything else real);
    GPU 1 is lost for the ticks in ``lost`` and comes back after."""
    patched = fake_nvml(scenario)
    with patched:
        sampler = ResilientSampler(reopen_after_s=0.0)
        rec = Recorder(store, step_s, retention)
        for i in range(ticks):
            if len(patched.fake.gpus) > 1:
                patched.fake.gpus[1]["lost"] = i in lost
            snap = sampler.sample()
            snap.time_unix_s = T0 + offset_s + (i + 1) * step_s
            rec.record(snap)
        sampler.close()
    return rec


def count(store: HistoryStore, tier: int) -> int:
    return store.conn.execute("SELECT count(*) FROM samples WHERE tier=?", (tier,)).fetchone()[0]


def test_tiers_roll_up_raw_into_minutes_and_hours_and_prune_past_retention(tmp_path):
    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    record(store, "healthy_and_idle", ticks=3 * 360, step_s=10.0, retention=Retention(600, 7200, None))
    raw, minute, hour = (store.time_range_ms(t) for t in (RAW, MINUTE, HOUR))
    end_ms = int((T0 + 3 * 3600) * 1000)
    assert raw is not None and minute is not None and hour is not None
    # raw kept 10 min (deleted in bounded slices, at most one slice late), minutes 2 h, hours forever
    assert end_ms - raw[0] <= 600_000 + 60_000 and raw[1] == end_ms
    assert end_ms - minute[0] <= 7200_000 + 60_000
    assert hour == (int(T0 * 1000) + 3_600_000, int(T0 * 1000) + 7_200_000)  # the third hour is not over
    # an hour bucket holds exactly what its minutes held: one hour of readable time per GPU, 360 samples
    rows = store.conn.execute(
        "SELECT gpu, read_ms, n, busy_pct, mem_mib, energy_j, throttle FROM samples WHERE tier=? AND t_ms=?",
        (HOUR, int(T0 * 1000) + 3_600_000),
    ).fetchall()
    assert len(rows) == 2
    busy = {r[0]: r for r in rows}
    assert all(r[1] == 3_600_000 and r[2] == 360 for r in rows)
    gpu0, gpu1 = sorted(busy)
    assert busy[gpu0][3] == pytest.approx(97.0) and busy[gpu1][3] == pytest.approx(0.0)
    assert busy[gpu0][4] == 66 * 1024 and busy[gpu1][6] == '{"gpu_idle": 3600.0}'
    # the fake's counter rises 1 J per sample: the recording's first sample has no delta, 359 J; the
    # second hour's first delta crosses the hour's edge from the raw row before it, 360 J
    assert busy[gpu0][5] == pytest.approx(359.0)
    second = store.conn.execute(
        "SELECT energy_j FROM samples WHERE tier=? AND t_ms=? AND gpu=?",
        (HOUR, int(T0 * 1000) + 7_200_000, gpu0),
    ).fetchone()
    assert second == (pytest.approx(360.0),)
    store.close()


def test_a_report_window_reads_each_span_once_across_pruned_tiers(tmp_path):
    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    record(store, "healthy_and_idle", ticks=3 * 360, step_s=10.0, retention=Retention(600, 7200, None))
    lo, hi = int(T0 * 1000), int((T0 + 3 * 3600) * 1000)
    pieces = plan(store, lo, hi, RAW)
    assert [p[0] for p in pieces] == [HOUR, MINUTE, RAW]
    assert pieces[0][1] == lo and pieces[-1][2] == hi
    assert all(a[2] == b[1] for a, b in itertools.pairwise(pieces))  # contiguous, no overlap
    history = load_local_history(store, T0, T0 + 3 * 3600)
    for series in history.gpus:
        assert sum(s.interval_s for s in series.samples) == pytest.approx(3 * 3600)
    energy = [e for e in interval_energy_j(history.gpus[0].samples) if e is not None]
    assert sum(energy) == pytest.approx(3 * 360 - 1)  # every delta once; the very first sample has none
    # a window over 8 days reads hours first, then the minutes and raw samples after the last full hour
    long = load_local_history(store, T0 - 9 * 86400, T0 + 3 * 3600)
    assert long.notes[0].startswith("read at 1-h resolution")
    assert sum(s.interval_s for s in long.gpus[0].samples) == pytest.approx(3 * 3600)


def test_a_gpu_lost_mid_run_is_lost_time_and_is_read_again_when_it_returns(tmp_path):
    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    record(store, "healthy_and_idle", ticks=60, step_s=1.0, retention=Retention(), lost=range(20, 30))
    history = load_local_history(store, T0, T0 + 60)
    gpu1 = history.gpus[1]
    lost = [s for s in gpu1.samples if s.lost]
    assert len(lost) == 10 and sum(s.interval_s for s in lost) == pytest.approx(10.0)
    after = [s for s in gpu1.samples if s.time_unix_s > T0 + 30]
    assert after and not any(s.lost for s in after) and after[-1].busy_pct == 0.0
    energy = interval_energy_j(gpu1.samples)
    back = gpu1.samples.index(after[0])
    assert energy[back] is None  # no counter reading at the gap's start: unknown, never guessed
    assert all(e is not None and e >= 0 for e in energy[back + 1 :])
    assert not any(s.lost for s in history.gpus[0].samples)  # the other GPU kept being read


def _child(store: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(store), "healthy_and_idle", "0.2", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_lines(proc: subprocess.Popen, n: int, timeout_s: float = 60.0 * BUSY_FACTOR) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(lines) < n and time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            break
        lines.append(line)
    return lines


def test_a_killed_recorder_loses_at_most_the_interval_it_was_writing(tmp_path):
    path = tmp_path / "monitor.sqlite"
    proc = _child(path)
    try:
        assert len(_wait_lines(proc, 8)) == 8, proc.stderr.read()  # type: ignore[union-attr]
    finally:
        proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30 * BUSY_FACTOR)
    sampled = 8 + rest.count("sampled")
    store = HistoryStore.open(path)
    rows = count(store, RAW) // 2  # two GPUs per tick
    assert sampled - 1 <= rows <= sampled
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_reader_next_to_a_live_writer_is_never_blocked(tmp_path):
    path = tmp_path / "monitor.sqlite"
    proc = _child(path)
    try:
        _wait_lines(proc, 2)
        seen: list[int] = []
        # bounded (a guard, not a race): at least 20 reads, until the writer has moved on
        deadline = time.monotonic() + 60 * BUSY_FACTOR
        while (len(seen) < 20 or seen[-1] == seen[0]) and time.monotonic() < deadline:
            store = HistoryStore.open(path, create=False)
            history = load_local_history(store, time.time() - 3600, time.time() + 1)
            seen.append(sum(len(g.samples) for g in history.gpus))
            store.close()
            time.sleep(0.05)
        assert seen == sorted(seen) and seen[-1] > seen[0]
        assert all(n % 2 == 0 for n in seen)  # two GPUs a tick: a reader never sees half a transaction
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30 * BUSY_FACTOR)


def test_the_record_command_stops_cleanly_on_sigterm(tmp_path):
    path = tmp_path / "monitor.sqlite"
    proc = _child(path, "cli")
    deadline = time.monotonic() + 60 * BUSY_FACTOR  # a guard: the 6 rows are awaited, however slow the start
    while (
        time.monotonic() < deadline
        and proc.poll() is None
        and (not path.exists() or count(HistoryStore.open(path), RAW) < 6)
    ):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30 * BUSY_FACTOR)
    assert proc.returncode == 0, err
    assert "recording 2 GPUs every 0.2s" in err and "Traceback" not in err
    assert count(HistoryStore.open(path), RAW) >= 6


def test_a_corrupt_history_is_one_line_and_nothing_else_is_touched(tmp_path, capfd):
    runs = tmp_path / "runs.sqlite"
    sqlite3.connect(runs).executescript("CREATE TABLE t (x); INSERT INTO t VALUES (42);")
    path = tmp_path / "monitor.sqlite"
    garbage = b"not a database, " * 512
    path.write_bytes(garbage)
    code, out, err = run_cli(capfd, "monitor", "report", "--store", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "is not a readable monitor history" in err and "Traceback" not in err
    assert path.read_bytes() == garbage  # left as it was for the user to inspect
    assert sqlite3.connect(runs).execute("SELECT x FROM t").fetchone() == (42,)
    with pytest.raises(Exception, match="not a readable monitor history"):
        HistoryStore.open(path)  # the recorder refuses it too, instead of writing over it


def test_missing_history_and_bad_flags_are_one_line(tmp_path, capfd):
    for args in (
        ["monitor", "report", "--store", str(tmp_path / "none.sqlite")],
        ["monitor", "report", "--since", "soon"],
        ["monitor", "report", "--usd-per-kwh", "-1"],
        ["monitor", "--quiet"],
        ["monitor", "--record", "--interval", "90s"],
        ["monitor", "--record", "--once"],
    ):
        code, _, err = run_cli(capfd, *args)
        assert code == 2 and err.startswith("gpuwise: error:") and err.count("\n") == 1, (args, err)


def test_record_with_the_live_view_writes_what_it_shows(tmp_path):
    import io

    from rich.console import Console

    from gpuwise.tui import live

    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    with fake_nvml("throttled"):
        sampler = ResilientSampler()
        rec = Recorder(store, 0.2)
        out = Console(file=io.StringIO(), width=120, force_terminal=False)
        assert live.run(out, sampler, 0.2, refreshes=3, on_sample=rec.record) == 3
        sampler.close()
    assert count(store, RAW) == 3 and "hw_thermal_slowdown" in out.file.getvalue()  # type: ignore[attr-defined]
    (reasons,) = {r[0] for r in store.conn.execute("SELECT reasons FROM samples WHERE tier=0")}
    assert reasons == 0x4 | 0x20 | 0x40  # sw_power_cap, sw_thermal_slowdown, hw_thermal_slowdown


def test_a_failed_write_loses_that_tick_only_and_is_said_once(tmp_path, capfd):
    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    with fake_nvml("throttled"):
        sampler = ResilientSampler()
        rec = Recorder(store, 1.0)
        assert rec.tick(sampler.sample())
        store.conn.execute("PRAGMA query_only=1")  # every write now fails, as on a full disk
        assert not rec.tick(sampler.sample()) and not rec.tick(sampler.sample())
        store.conn.execute("PRAGMA query_only=0")
        assert rec.tick(sampler.sample())
        sampler.close()
    err = capfd.readouterr().err
    assert err.count("sample not recorded") == 1 and "recording again" in err
    assert count(store, RAW) == 2
    with pytest.raises(GpuwiseError, match="cannot create the directory"):
        HistoryStore.open(Path("/proc/gpuwise-test/monitor.sqlite"))  # no directory can be made there


def test_a_one_minute_interval_still_gets_each_buckets_energy(tmp_path):
    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    record(store, "healthy_and_idle", ticks=30, step_s=60.0, retention=Retention(), offset_s=30.0)
    energy = [
        r[0] for r in store.conn.execute("SELECT energy_j FROM samples WHERE tier=? ORDER BY t_ms", (MINUTE,))
    ]
    assert len(energy) >= 2 * 28 and energy[:2] == [None, None]  # the recording's first sample: no delta
    assert all(e == pytest.approx(1.0) for e in energy[2:])  # one sample a minute, 1 J each (the fake)


def test_record_without_a_driver_is_one_line_and_creates_no_history(tmp_path, capfd):
    from fake_nvml import no_driver

    path = tmp_path / "monitor.sqlite"
    with no_driver():
        code, out, err = run_cli(capfd, "monitor", "--record", "--quiet", "--store", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and "no NVIDIA GPU" in err
    assert not path.exists()
