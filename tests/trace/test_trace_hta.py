"""Agreement with Holistic Trace Analysis on every trace it could analyze, hand-checked verdicts on the rest.

Reference: tests/data/traces/hta_reference.csv, rows of `holistictraceanalysis==0.5.0; pandas==2.3.3`
(each file analyzed alone with HTA's defaults: last ProfilerStep dropped, 30 µs kernel-wait threshold).
"""

from __future__ import annotations

import pytest

from conftest import TRACES
from gpuwise.errors import GpuwiseError
from gpuwise.trace.rank import analyze_file
from hta_reference import read_reference

TOLERANCE_PP = 0.5


_CACHE: dict = {}


@pytest.fixture
def reference(trace_dir):
    """Each listed trace parsed once for the whole module."""
    if trace_dir not in _CACHE:
        ranks, streams = read_reference(TRACES / "hta_reference.csv")
        _CACHE[trace_dir] = ranks, streams, {p: analyze_file(trace_dir / p) for p in ranks}
    return _CACHE[trace_dir]


def test_reference_covers_the_traces(reference):
    ranks, _, _ = reference
    assert len(ranks) >= 30


def test_temporal_breakdown_within_half_a_point_of_hta(reference):
    ranks, _, analyses = reference
    worst = 0.0
    for path, ref in ranks.items():
        t = analyses[path].temporal
        assert t is not None, path
        diffs = [
            abs(t.idle_pct - ref["idle_time_pctg"]),
            abs(t.compute_pct - ref["compute_time_pctg"]),
            abs(t.non_compute_pct - ref["non_compute_time_pctg"]),
        ]
        assert max(diffs) <= TOLERANCE_PP, (path, diffs)
        assert t.span_us == pytest.approx(ref["kernel_time"], abs=1), path
        assert t.idle_us == pytest.approx(ref["idle_time"], abs=1), path
        worst = max(worst, *diffs)
    assert worst <= 0.01  # in practice only HTA's rounding to 2 decimals separates the numbers


def test_idle_breakdown_per_stream_matches_hta(reference):
    _, streams, analyses = reference
    checked = 0
    for path, ref in streams.items():
        mine = {s.stream: s for s in analyses[path].idle_by_stream}
        assert {s for s, _ in ref} <= set(mine), path
        for (stream, metric), value in ref.items():
            category = metric[len("idle_") :].rsplit("_", 1)[0]
            s = mine[stream]
            if metric.endswith("_time"):
                assert getattr(s, f"{category}_us") == pytest.approx(value, abs=0.01), (path, stream, metric)
                checked += 1
            elif value == value:  # ratio (NaN when the stream never idles)
                assert s.ratio(category) == pytest.approx(value, abs=0.006), (path, stream, metric)
    assert checked >= 180


# Traces HTA 0.5.0 could not analyze (tests/data/traces/failures.txt): gpuwise still reads them.
def test_cpu_only_traces_get_host_statistics_and_a_warning(trace_dir):
    for rel in (
        "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        "hta/rank_non_gpu/rank_non_gpu.json.gz",
        "hta/mixed_files/rank_non_gpu.json.gz",
        "hta/rank_unavailable/rank_not_found.json.gz",
        "hta/distributed_info_unavailable/distributed_info_not_found.json.gz",
    ):
        a = analyze_file(trace_dir / rel)
        assert a.temporal is None and a.device.kind == "cpu", rel
        assert any("no GPU activity" in w for w in a.warnings), rel
        assert a.steps.count == 1, rel
    cpu_only = analyze_file(trace_dir / "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert cpu_only.rank.rank == 34 and cpu_only.rank.world_size == 300
    # rank_not_found has distributedInfo without a rank, and no rank in its file name
    assert analyze_file(trace_dir / "hta/rank_unavailable/rank_not_found.json.gz").rank.rank is None
    # a multi-process loader whose __next__ takes 0.07 ms of a 75 ms step
    loader = analyze_file(trace_dir / "hta/rank_non_gpu/rank_non_gpu.json.gz").steps
    assert loader.loader_kind == "multi-process" and loader.input_wait_pct == pytest.approx(0.094, abs=0.001)


def test_cupti_counter_trace_has_no_kernel_activity(trace_dir):
    a = analyze_file(trace_dir / "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz")
    assert a.temporal is None and a.sync.by_name == {
        "cudaDeviceSynchronize": 5,
        "cudaStreamSynchronize": 16,
        "cudaMemcpy": 1,
    }


@pytest.mark.parametrize(
    "rel, message",
    [
        (
            "hta/execution_trace/benchmark_simple_add_et.json.gz",
            "no 'traceEvents' array (top-level keys: schema, pid",
        ),
        ("hta/memory_analysis/memory_timeline.raw.gz", "not a PyTorch profiler trace"),
    ],
)
def test_files_that_are_not_profiler_traces_are_named_as_such(trace_dir, rel, message):
    with pytest.raises(GpuwiseError, match="not a PyTorch profiler trace") as err:
        analyze_file(trace_dir / rel)
    assert message in str(err.value) and rel.split("/")[-1] in str(err.value)
