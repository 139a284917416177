"""The SQLite run store and `gpuwise runs list | show | compare`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import run_cli
from gpuwise.errors import GpuwiseError
from gpuwise.profile.analysis import build_run
from gpuwise.profile.run_comparison import compare_runs
from gpuwise.profile.saved_runs import load_run, save_run
from gpuwise.store.runs import RunStore


def raw_run(data_wait_s: float, workers: int, label: str = "train.py") -> dict:
    compute = {"forward": 0.02, "backward": 0.04, "optimizer": 0.005, "other": 0.002}
    steps = [
        {
            "wall_s": data_wait_s + sum(compute.values()),
            "phase_s": {"data_wait": data_wait_s, **compute},
            "memory_bytes": 5e8,
        }
        for _ in range(12)
    ]
    return {
        "label": label,
        "steps": steps,
        "warmup": 2,
        "device": "cpu",
        "status": "completed",
        "cpu_count": 8,
        "loader": {"num_workers": workers, "pin_memory": False, "batches": 12},
        "meta": {"command": "python train.py"},
        "telemetry": {"cpu_count": 8, "process_cpu_pct": 20.0},
    }


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "runs.sqlite"
    with RunStore.open(path) as store:
        save_run(store, build_run(raw_run(0.08, 0)))
        save_run(store, build_run(raw_run(0.002, 7)))
    return path


def test_save_and_load_round_trip(store_path):
    with RunStore.open(store_path) as store:
        rows = store.list()
        assert [r.id for r in rows] == [2, 1]
        assert rows[1].top_finding == "input_bound" and rows[0].top_finding is None
        run = load_run(store, 1)
        assert run.run_id == 1 and run.findings[0].id == "input_bound"
        assert run.evidence.loader.loader_num_workers == 0
        assert store.resolve("last") == 2 and store.resolve("-2") == 1


def test_missing_run_and_bad_references_are_one_line_errors(store_path):
    with RunStore.open(store_path) as store:
        with pytest.raises(GpuwiseError, match=r"no run 9 .*runs 1-2"):
            load_run(store, 9)
        with pytest.raises(GpuwiseError, match="fewer than 5 runs"):
            load_run(store, -5)
        with pytest.raises(GpuwiseError, match="must be a number"):
            load_run(store, "first")


def test_a_file_that_is_not_a_store_is_reported(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("this is not SQLite " * 100)
    with pytest.raises(GpuwiseError, match="not a readable gpuwise run store"):
        RunStore.open(bogus)
    assert bogus.read_text().startswith("this is not SQLite")  # never modified


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(GpuwiseError, match="newer gpuwise"):
        RunStore.open(path)


def test_corrupt_document_names_the_run(store_path):
    conn = sqlite3.connect(store_path)
    conn.execute("UPDATE runs SET document = '{\"label\": ' WHERE id = 2")
    conn.commit()
    conn.close()
    with RunStore.open(store_path) as store, pytest.raises(GpuwiseError, match=r"run 2 .* is corrupt"):
        load_run(store, 2)


def test_compare_names_speedup_phases_settings_and_findings(store_path):
    with RunStore.open(store_path) as store:
        cmp = compare_runs(load_run(store, 1), load_run(store, 2))
    assert cmp.speedup_x == pytest.approx(0.147 / 0.069, rel=1e-3)
    assert cmp.phases["data_wait"]["delta_s"] == pytest.approx(-0.078)
    assert cmp.settings_changed["loader.num_workers"] == {"a": 0, "b": 7}
    assert cmp.resolved == ["input_bound"] and cmp.new == []


def test_runs_cli(store_path, tmp_path):
    listed = run_cli("runs", "list", "--json", "--store", str(store_path))
    assert listed.exit_code == 0 and [r["id"] for r in listed.json()["runs"]] == [2, 1]
    shown = run_cli("runs", "show", "1", "--json", "--store", str(store_path))
    doc = shown.json()
    assert (
        doc["kind"] == "run"
        and doc["findings"][0]["id"] == "input_bound"
        and doc["evidence"]["source"] == "profile"
    )
    text = run_cli("runs", "compare", "1", "2", "--store", str(store_path))
    assert text.exit_code == 0 and "resolved" in text.stdout and "input_bound" in text.stdout
    cmp = run_cli("runs", "compare", "1", "last", "--json", "--store", str(store_path)).json()
    assert cmp["kind"] == "run_comparison" and cmp["findings_resolved"] == ["input_bound"]
    same = run_cli("runs", "compare", "2", "last", "--store", str(store_path))
    assert same.exit_code == 2 and "two different runs" in same.stderr
    missing = run_cli("runs", "show", "7", "--store", str(store_path))
    assert missing.exit_code == 2 and missing.stderr.startswith("gpuwise: error: no run 7")
    # issue #25: a --store that does not exist is a typo, not an empty store
    empty = run_cli("runs", "list", "--json", "--store", str(tmp_path / "none.sqlite"))
    assert empty.exit_code == 2 and "no store there" in empty.stderr
    assert not (tmp_path / "none.sqlite").exists()  # listing does not create a store


def test_default_store_follows_the_environment(tmp_path, monkeypatch):
    from gpuwise.store.runs import default_store_path

    monkeypatch.setenv("GPUWISE_STORE", str(tmp_path / "mine.sqlite"))
    assert default_store_path() == tmp_path / "mine.sqlite"
    monkeypatch.delenv("GPUWISE_STORE")
    assert default_store_path().name == "runs.sqlite" and "gpuwise" in str(default_store_path())


def test_saved_document_is_plain_json(store_path):
    conn = sqlite3.connect(store_path)
    (document,) = conn.execute("SELECT document FROM runs WHERE id = 1").fetchone()
    conn.close()
    data = json.loads(document)
    assert data["phases"]["data_wait"]["pct"] > 50 and data["findings"][0]["id"] == "input_bound"


def test_a_run_saved_by_an_earlier_version_loads_and_keeps_its_json(tmp_path):
    """tests/data/profile_run_saved_by_0_1.json: a real CPU run as gpuwise stored it when the run document
    was a plain dict (main at 370dd0a); a store holding it must load it and write back the same JSON:
    ``started_at`` under its schema-2 name, and Evidence fields added since then as null."""
    saved = json.loads((Path(__file__).parents[1] / "data" / "profile_run_saved_by_0_1.json").read_text())
    path = tmp_path / "old.sqlite"
    with RunStore.open(path):
        pass  # creates the schema
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO runs (created_at, kind, label, command, group_id, rank, status, exit_code, device,"
            " gpu, measured_steps, step_time_s, steps_per_s, top_finding, document)"
            " VALUES ('2026-11-25T10:00:00Z', 'profile', 'x', '', NULL, NULL, 'completed', 0, 'cpu', '',"
            " 6, 0.01, 100, NULL, ?)",
            (json.dumps(saved),),
        )
    with RunStore.open(path) as store:
        run = load_run(store, 1)
    assert run.summary.measured_steps == 6 and run.summary.loader is not None
    assert run.summary.phases["forward"].s_per_step > 0
    expected = {("started_at_unix_s" if k == "started_at" else k): v for k, v in saved.items()}
    loaded = {k: v for k, v in run.to_dict().items() if k != "run_id"}
    expected["telemetry"].setdefault("cpu_steal_pct", None)  # measured since (null: not in this record)
    expected.setdefault("step_boundary", None)  # in the run document since (null: not in this record)
    evidence, old_evidence = loaded.pop("evidence"), expected.pop("evidence")
    assert loaded == expected
    assert {k: v for k, v in evidence.items() if k in old_evidence} == old_evidence
    assert evidence["workload_kind"] == "training"  # derived on load from the saved phases (a backward)
    # fields added since are absent: null, or an empty list for per-step series and kept objects
    added = evidence.keys() - old_evidence.keys() - {"workload_kind"}
    assert all(evidence[k] is None or evidence[k] == [] for k in added), {k: evidence[k] for k in added}
