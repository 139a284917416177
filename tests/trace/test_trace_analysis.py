"""gpuwise trace on hand-made traces (every number worked out by hand) and on real Kineto traces."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwise.diagnose import load_evidence
from gpuwise.trace.analyze import analyze_traces
from gpuwise.trace.compare import compare_reports
from gpuwise.units import GiB

DATA = Path(__file__).parents[1] / "data" / "traces"
RANK0, RANK1 = DATA / "hand_rank0.json", DATA / "hand_rank1.json"
NW0 = "kineto/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "kineto/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"


@pytest.fixture(scope="module")
def hand():
    return analyze_traces([RANK0]).ranks[0]


def test_hand_trace_temporal_breakdown_as_hta_defines_it(hand):
    # Device ops kept (the last step, from t=2000, is dropped): sgemm 310-610, nccl 500-700, fill 705-710,
    # memcpy 1305-1405, sgemm 1410-1810. Span 1500; busy 390+5+100+400 = 895; compute 300+5+400 = 705.
    t = hand.temporal
    assert (t.span_us, t.idle_us, t.compute_us, t.non_compute_us) == (1500, 605, 705, 190)
    assert t.idle_pct == pytest.approx(100 * 605 / 1500)
    assert hand.dropped_last_step and hand.steps_in_window == 2


def test_hand_trace_idle_per_stream(hand):
    by_stream = {s.stream: s for s in hand.idle_by_stream}
    # stream 7: fill launched at 620 > 610 (host wait 95), memcpy launched 1300 > 710 (host wait 595),
    # sgemm launched 1400 < 1405 with a 5 µs gap (kernel wait).
    s7 = by_stream[7]
    assert (s7.host_wait_us, s7.kernel_wait_us, s7.other_us, s7.kernels) == (690, 5, 0, 4)
    assert by_stream[20].idle_us == 0 and by_stream[20].ratio("other") is None


def test_hand_trace_kernels_steps_host_copies_comm_memory(hand):
    k = hand.kernels
    assert (
        k.count == 4
        and k.categories["gemm"]["time_us"] == 700
        and k.categories["communication"]["count"] == 1
    )
    assert k.tiny_kernel_pct == 25.0  # the 5 µs fill of 4 kernels
    assert k.fp32_matmul_pct == 100.0  # sgemm
    s = hand.steps
    assert s.count == 3 and s.mean_ms == 1.0 and s.numbers == [1, 2, 3]
    assert s.input_wait_pct == pytest.approx(20.0) and s.loader_kind == "single-process"
    assert hand.sync.calls == 1 and hand.sync.wait_pct == pytest.approx(100 * 50 / 3000)
    launch = hand.launches
    assert launch.kernels_per_step == 2.0 and launch.launch_delay_median_us == pytest.approx(
        47.5
    )  # 10, 10, 85, 180
    assert hand.copies.directions["HtoD"]["bytes"] == 1_000_000 and hand.copies.pageable_copy_pct == 100.0
    assert hand.copies.h2d_copy_pct == pytest.approx(100 * 100 / 1500)
    assert hand.comm.overlap_pct == pytest.approx(55.0) and hand.comm.exposed_pct == pytest.approx(6.0)
    assert hand.memory.peak_reserved_bytes == 4 * GiB and hand.memory.peak_allocated_bytes == 2 * GiB
    assert hand.device.catalog_id == "a100-80gb-sxm" and hand.rank.rank == 0 and hand.rank.world_size == 4
    assert any("unknown kind ph='Q'" in w for w in hand.warnings)


def test_cross_rank_reports_duplicates_missing_and_skew(tmp_path):
    dup = tmp_path / "copy_of_rank1.json"
    shutil.copy(RANK1, dup)
    report = analyze_traces([RANK0, RANK1, dup])
    c = report.cross_rank
    assert len(report.ranks) == 3  # the duplicate is analyzed, not dropped
    assert c.duplicates == {1: [str(RANK1), str(dup)]} and c.missing == [2, 3]
    assert c.rank_step_time_s == {0: 0.001, 1: 0.0013} and c.slowest_rank == 1
    assert c.step_skew_pct == pytest.approx(100 * (1.3 - 1.15) / 1.15)
    assert "straggler" in {f.id for f in report.findings}
    assert any("appears in 2 files" in n for n in c.notes)


def test_resnet_num_workers_0_is_input_bound_and_4_is_not(trace_dir):
    before, after = analyze_traces([trace_dir / NW0]), analyze_traces([trace_dir / NW4])
    wait0, wait4 = before.ranks[0].steps.input_wait_pct, after.ranks[0].steps.input_wait_pct
    assert wait0 > 30 and wait4 < 2
    found0 = {f.id: f for f in before.findings}
    assert found0["input_bound"].severity == "high"
    assert "input_bound" not in {f.id for f in after.findings}
    assert "launch_bound" not in found0  # the idle time is the loader's, not the launches'
    assert {"pageable_copies", "no_mixed_precision"} <= set(
        found0
    )  # pageable H2D, fp32 convolutions on a V100
    cmp = compare_reports(before, after, "nw0", "nw4")
    step = next(c for c in cmp.metrics if c.name == "step_time_ms")
    assert step.b < step.a and step.verdict == "better" and "input_bound" in cmp.findings_removed


def test_multi_rank_comm_overlap_matches_hta(trace_dir):
    report = analyze_traces([trace_dir / "hta" / "trace_filter"])
    overlap = {r.rank.rank: r.comm.overlap_pct for r in report.ranks}
    # HTA get_comm_comp_overlap on these files: 11.81 % and 20.05 %
    assert overlap[0] == pytest.approx(11.81, abs=0.01) and overlap[1] == pytest.approx(20.05, abs=0.01)
    assert report.cross_rank.missing == list(range(2, 128)) and report.cross_rank.least_comm_rank == 1
    # Rank 1 sits 27.3 ms per step less in collectives (195.3 vs 168.0 ms), 4.4 % of the 617 ms step,
    # over one measured step, with 126 of 128 ranks untraced: below STRAGGLER_COMM_GAP_PCT, no straggler.
    cross = next(e for e in report.evidence if e.label == "cross-rank")
    assert cross.comm.rank_comm_time_s == pytest.approx({0: 0.195327, 1: 0.168027})
    assert "straggler" not in {f.id for f in report.findings}


def test_json_document_feeds_the_planner(cli, tmp_path):
    result = cli("trace", str(RANK0), str(RANK1), "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["kind"] == "trace" and doc["schema_version"] == 2
    tb = doc["ranks"][0]["temporal_breakdown"]
    assert set(tb) >= {"idle_pct", "compute_pct", "non_compute_pct", "span_us"}
    path = tmp_path / "trace.json"
    path.write_text(result.stdout)
    evidence = load_evidence(path)
    assert [e.source for e in evidence] == ["trace"] * 3 and evidence[-1].comm.rank_step_time_s == {
        0: 0.001,
        1: 0.0013,
    }
    assert {f["id"] for f in doc["findings"]} >= {"straggler", "input_bound"}


def test_terminal_view_and_compare(cli):
    import os

    wide = cli("trace", str(RANK0), env={**os.environ, "COLUMNS": "160"})
    assert (
        wide.exit_code == 0 and "Temporal breakdown" in wide.stdout and "volta_sgemm_128x64_nn" in wide.stdout
    )
    narrow = cli("trace", str(RANK0), env={**os.environ, "COLUMNS": "80"})
    assert (
        "volta_sgemm_128x64_" in narrow.stdout and "350.0 µs" in narrow.stdout
    )  # names give way, numbers do not
    cmp = cli("trace", "--compare", str(RANK0), str(RANK1), "--json")
    assert cmp.exit_code == 0, cmp.stderr
    doc = cmp.json()
    assert doc["kind"] == "trace_compare"
    step = next(m for m in doc["metrics"] if m["name"] == "step_time_ms")
    assert (step["a"], step["b"], step["verdict"]) == (1.0, 1.3, "worse")
    assert cli("trace", "--compare", str(RANK0)).exit_code == 2


def test_directory_input_and_gzip(tmp_path, cli):
    with open(RANK0, "rb") as src, gzip.open(tmp_path / "rank0.pt.trace.json.gz", "wb") as dst:
        dst.write(src.read())
    shutil.copy(RANK1, tmp_path / "rank1.json")
    (tmp_path / "notes.txt").write_text("not a trace")
    report = analyze_traces([tmp_path])
    assert sorted(r.rank.rank for r in report.ranks) == [0, 1]
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    result = cli("trace", str(empty))
    assert result.exit_code == 2 and "no .json or .json.gz trace files" in result.stderr


def test_trace_command_does_not_import_torch():
    code = (
        "import sys; from gpuwise.cli.app import main\n"
        f"try:\n    main(['trace', {str(RANK0)!r}, '--json'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kind"] == "trace"
