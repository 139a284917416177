"""An Nsight Systems export of several processes (an `nsys profile torchrun ...` of a 2-process job) is
read as one rank per process (issue 31, item 1 leftover), so the cross-rank analysis runs on the one file.
Built to the documented SQLite schema (tests/nsys_lookalike.py): process 200's steps are 50 % longer than
process 100's."""

from __future__ import annotations

import pytest

from gpuwise.trace.analyze import analyze_traces
from gpuwise.trace.rank import analyze_file, analyze_file_ranks
from nsys_lookalike import NsysExport

STEP_NS = {100: 1_000_000, 200: 1_500_000}  # pid -> step length


def _two_processes(path):
    e = NsysExport()
    e.gpu(0, "NVIDIA H100 80GB HBM3", 85_520_809_984, 9, 0)
    e.gpu(1, "NVIDIA H100 80GB HBM3", 85_520_809_984, 9, 0)
    for pid, device in ((100, 0), (200, 1)):
        step = STEP_NS[pid]
        for n in range(5):  # correlation ids repeat across processes, as they do in real exports
            t = n * step
            e.range(t, step, f"ProfilerStep#{n}", pid=pid, tid=pid)
            e.call(t + 1000, 2000, "cudaLaunchKernel", n + 1, pid=pid, tid=pid)
            e.kernel(
                t + 5000, step // 2, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", n + 1, device=device, pid=pid
            )
    return e.write(path)


def test_one_rank_per_process(tmp_path):
    path = _two_processes(tmp_path / "job.sqlite")
    ranks = analyze_file_ranks(path)
    assert [r.rank.rank for r in ranks] == [0, 1]
    for r, pid in zip(ranks, (100, 200), strict=True):
        # its own kernels, linked to its own launches (4: HTA's window leaves the last of the 5 steps out)
        assert r.kernels.count == 4 and r.launches.launches == 4 and r.steps_in_window == 4
        assert r.steps.count == 5
        assert r.steps.mean_ms == pytest.approx(STEP_NS[pid] / 1e6)
        assert any(f"process pid {pid}, rank {r.rank.rank} of the 2 processes" in w for w in r.warnings)
        assert not any("analysed together as one rank" in w for w in r.warnings)
    merged = analyze_file(path)  # the single-table reader still reads both processes as one, and says so
    assert merged.kernels.count > 4 and any("analysed together as one rank" in w for w in merged.warnings)


def test_cross_rank_analysis_on_one_file(tmp_path):
    report = analyze_traces([_two_processes(tmp_path / "job.sqlite")])
    assert [r.rank.rank for r in report.ranks] == [0, 1]
    cross = report.cross_rank.to_dict()
    assert cross["world_size"] == 2 and cross["missing_ranks"] == [] and cross["duplicates"] == {}
    assert cross["rank_step_time_s"] == {"0": pytest.approx(0.001), "1": pytest.approx(0.0015)}
    assert cross["slowest_rank"] == 1 and cross["step_skew_pct"] == pytest.approx(20.0)  # (1.5-1.25)/1.25
    assert "straggler" in {f.id for f in report.findings}


def test_one_process_stays_one_rank(tmp_path):
    e = NsysExport()
    e.gpu(0, "NVIDIA H100 80GB HBM3", 85_520_809_984, 9, 0)
    e.call(1000, 1000, "cudaLaunchKernel", 1)
    e.kernel(5000, 10_000, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 1)
    ranks = analyze_file_ranks(e.write(tmp_path / "one.sqlite"))
    assert len(ranks) == 1 and ranks[0].kernels.count == 1


def test_the_summary_cache_holds_a_file_of_several_ranks(tmp_path, monkeypatch):
    from gpuwise.trace.parallel import analyze_many

    monkeypatch.setenv("GPUWISE_TRACE_CACHE", str(tmp_path / "cache.sqlite"))
    path = _two_processes(tmp_path / "job.sqlite")
    first, s1 = analyze_many([str(path)], workers=1)
    again, s2 = analyze_many([str(path)], workers=1)
    assert (s1.cached_ranks, s1.analyzed_ranks, s2.cached_ranks, s2.analyzed_ranks) == (0, 1, 2, 0)
    assert [r.rank.rank for r in again.ranks] == [0, 1]
    assert again.to_dict()["ranks"] == first.to_dict()["ranks"]
    assert {f.id for f in again.findings} == {f.id for f in first.findings}
