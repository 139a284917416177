"""A straggler in synchronous training: equal step times, but the slow rank waits least at collectives.

Hand-made 3-rank traces (every number chosen here): three 1000 µs ProfilerSteps per rank, each step a
compute kernel from +10 µs, then an all-reduce that ends at +910 µs on every rank (it completes when
the last rank arrives). Ranks 0 and 1 compute 400 µs and sit 500 µs in the all-reduce; rank 2 computes
550 µs and spends only 350 µs in it. The last step is dropped (HTA's window), leaving two.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.diagnose import Evidence
from gpuwise.trace.analyze import analyze_traces

STEP_US, START_US, COMM_END_US = 1000, 10, 910
COMPUTE_US = {0: 400, 1: 400, 2: 550}
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _trace(rank: int, compute_us: int, world_size: int) -> dict:
    events = [{"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0, "args": {"name": "python"}}]
    corr = 0
    for step in range(3):
        t0 = step * STEP_US
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step + 1}",
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": STEP_US,
                "args": {},
            }
        )
        kernels = [
            ("volta_sgemm_128x64_nn", 7, t0 + START_US, compute_us),
            (NCCL, 20, t0 + START_US + compute_us, COMM_END_US - START_US - compute_us),
        ]
        for name, stream, ts, dur in kernels:
            corr += 1
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t0 + corr % 2,
                    "dur": 1,
                    "args": {"cbid": 211, "correlation": corr},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": stream,
                    "ts": ts,
                    "dur": dur,
                    "args": {"device": 0, "stream": stream, "correlation": corr},
                }
            )
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size},
        "traceEvents": events,
    }


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("straggler")
    paths = []
    for rank, compute in COMPUTE_US.items():
        path = folder / f"rank{rank}.json"
        path.write_text(json.dumps(_trace(rank, compute, len(COMPUTE_US))))
        paths.append(path)
    return paths


def test_equal_steps_but_least_wait_names_the_straggler(traces):
    report = analyze_traces(traces)
    c = report.cross_rank
    assert c.rank_step_time_s == {0: 0.001, 1: 0.001, 2: 0.001} and c.step_skew_pct == 0
    assert c.comm_ms_per_step == {0: 0.5, 1: 0.5, 2: 0.35} and c.least_comm_rank == 2
    cross = next(e for e in report.evidence if e.label == "cross-rank")
    assert cross.comm.rank_comm_time_s == pytest.approx({0: 0.0005, 1: 0.0005, 2: 0.00035})
    assert (
        Evidence.from_dict(json.loads(json.dumps(cross.to_dict()))).comm.rank_comm_time_s
        == cross.comm.rank_comm_time_s
    )
    found = {f.id: f for f in report.findings}
    straggler = found["straggler"]
    assert straggler.metrics["straggler_rank"] == 2 and straggler.confidence == "medium"
    assert straggler.metrics["comm_wait_gap_s"] == pytest.approx(0.00015)  # 500 - 350 µs per step
    assert straggler.metrics["comm_wait_gap_pct"] == pytest.approx(15.0) and straggler.severity == "medium"
    assert "the others wait about 0.15 ms per step" in straggler.summary


def test_ranks_that_compute_alike_have_no_straggler(traces):
    report = analyze_traces(traces[:2])  # ranks 0 and 1: same compute, same wait
    assert report.cross_rank.comm_ms_per_step == {0: 0.5, 1: 0.5}
    assert "straggler" not in {f.id for f in report.findings}
