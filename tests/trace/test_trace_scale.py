"""Many ranks (issue #32): the same report from one process, a local pool and a real Dask LocalCluster;
one bad rank lost alone and named; the summary cache; distributions instead of a row per rank.

Source: PARAM's 8 real DLRM rank traces (param/dlrm_kineto of the third-party data, tests/third_party.py),
copied with their rank rewritten where a test needs more ranks.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, run_cli
from gpuwise.trace.parallel import analyze_many
from gpuwise.trace.rank_distribution import modified_z, rank_distribution

distributed = pytest.importorskip("distributed")  # the dask extra (in the dev extra)

DLRM = "param/dlrm_kineto"
_RANK = re.compile(rb'"distributedInfo": \{"backend": "nccl", "rank": \d+, "world_size": \d+\}')
_TIMINGS = ("parse_s", "analyze_s")  # wall-clock figures of the parse itself: differ between any two runs


def comparable(report: Any) -> dict[str, Any]:
    """The report's JSON body without the parse timings."""
    body = report.to_dict()
    for r in body["ranks"]:
        for key in _TIMINGS:
            r.pop(key)
    return body


def rank_copies(sources: list[Path], ranks: int, target: Path) -> list[Path]:
    """``ranks`` files, rank r a copy of source r mod len(sources) whose distributedInfo says rank r of N."""
    target.mkdir(parents=True, exist_ok=True)
    texts = [p.read_bytes() for p in sources]
    out = []
    for r in range(ranks):
        info = b'"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d}' % (r, ranks)
        path = target / f"rank{r}.pt.trace.json"
        path.write_bytes(_RANK.sub(info, texts[r % len(texts)], count=1))
        out.append(path)
    return out


@pytest.fixture(scope="module")
def cluster():
    """A real dask.distributed LocalCluster: 2 worker processes, 1 thread each."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit="2GiB"
    ) as c:
        yield c


@pytest.fixture
def dlrm(trace_dir) -> Path:
    return trace_dir / DLRM


def test_workers_1_2_and_a_dask_localcluster_give_the_same_report(dlrm, cluster):
    one, s1 = analyze_many([str(dlrm)], workers=1, use_cache=False)
    two, s2 = analyze_many([str(dlrm)], workers=2, use_cache=False)
    dask, s3 = analyze_many([str(dlrm)], dask_address=cluster.scheduler_address, use_cache=False)
    assert (s1.engine, s2.engine, s3.engine) == ("in-process", "processes", "dask")
    assert len(s2.worker_process_cpu_s) == 2 and s3.analyzed_ranks == 8
    assert [f.id for f in one.findings] and [f.id for f in one.findings] == [f.id for f in dask.findings]
    assert comparable(one) == comparable(two) == comparable(dask)
    assert one.cross_rank.slowest_rank == 1 and len(one.ranks) == 8
    default, s0 = analyze_many([str(dlrm)], use_cache=False)  # 7 MB: under POOL_MIN_BYTES, no pool
    assert s0.engine == "in-process" and comparable(default) == comparable(one)


def _truncated(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_bytes()[:20000])  # a rank file cut while it was written
    return target


def test_a_bad_rank_is_lost_alone_and_named_by_every_engine(dlrm, cluster, tmp_path):
    good = sorted(dlrm.glob("*.json"))[:3]
    run = tmp_path / "run"
    run.mkdir()
    for p in good:
        (run / p.name).write_bytes(p.read_bytes())
    bad = _truncated(good[0], run / "worker9_step_12.pt.trace.json")
    for kwargs in ({"workers": 1}, {"workers": 2}, {"dask_address": cluster.scheduler_address}):
        report, stats = analyze_many([str(run)], use_cache=False, **kwargs)
        assert len(report.ranks) == 3 and stats.lost_ranks == 1, kwargs
        assert [s.file for s in report.skipped] == [str(bad)]
        assert "truncated" in report.skipped[0].reason, report.skipped[0].reason
    result = run_cli("trace", str(run), "--workers", "2")
    assert result.exit_code == 0, result.stderr
    assert "skipped 1 of 4 files" in result.stderr and bad.name in "".join(result.stdout.split())
    strict = run_cli("trace", str(run), "--workers", "2", "--strict")
    assert (
        strict.exit_code == 2 and strict.stderr.startswith("gpuwise: error: ") and str(bad) in strict.stderr
    )
    assert "Traceback" not in strict.stderr


def test_the_summary_cache_gives_the_same_report_and_notices_a_changed_file(dlrm, tmp_path, monkeypatch):
    run = tmp_path / "run"
    files = rank_copies(sorted(dlrm.glob("*.json")), 8, run)
    monkeypatch.setenv("GPUWISE_TRACE_CACHE", str(tmp_path / "cache.sqlite"))
    first, s1 = analyze_many([str(run)], workers=2)
    again, s2 = analyze_many([str(run)], workers=2)
    assert (s1.cached_ranks, s1.analyzed_ranks, s2.cached_ranks, s2.analyzed_ranks) == (0, 8, 8, 0)
    assert json.dumps(again.to_dict()) == json.dumps(first.to_dict())  # timings included: they are cached
    files[3].write_bytes(files[3].read_bytes().replace(b'"ts": ', b'"ts":  ', 1))  # same events, new bytes
    _, s3 = analyze_many([str(run)], workers=1)
    assert (s3.cached_ranks, s3.analyzed_ranks) == (7, 1)
    monkeypatch.setenv("GPUWISE_TRACE_CACHE_MB", "0.02")  # room for ~3 summaries of ~6 KB
    analyze_many([str(run)], workers=1, use_cache=True)
    import sqlite3

    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        stored = db.execute("SELECT COUNT(*), SUM(bytes) FROM summaries").fetchone()
    assert 1 <= stored[0] < 8 and stored[1] <= 20000


def _slowed(path: Path, factor: float) -> None:
    """Every timestamp and duration of the trace times ``factor``: the same run, ``factor`` times slower."""
    doc = json.loads(path.read_bytes())
    for e in doc["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(e.get(key), (int, float)):
                e[key] = e[key] * factor
    path.write_text(json.dumps(doc))


def test_beyond_32_ranks_the_report_shows_distributions_and_json_keeps_every_rank(dlrm, tmp_path):
    run = tmp_path / "run"
    files = rank_copies(sorted(dlrm.glob("*.json")), 40, run)
    _slowed(files[17], 3.0)
    text = run_cli("trace", str(run), "--workers", "2", "--no-cache")
    assert text.exit_code == 0, text.stderr
    out = text.stdout
    assert "40 ranks, 40 with steps" in out and "Mean step time per rank: ranks per bin" in out
    assert re.search(r"rank 17: [\d.,]+ ms per step \(slower than the median; z \+\d", out), out
    assert out.count(".pt.trace.json") <= 12  # 5 slowest + 5 fastest rows, + the detailed rank
    doc = run_cli("trace", str(run), "--workers", "2", "--no-cache", "--json").json()
    assert len(doc["ranks"]) == 40 and doc["execution"]["engine"] == "processes"
    dist = doc["rank_distribution"]
    assert dist["slowest"][0]["rank"] == 17 and [o["rank"] for o in dist["outliers"]] == [17]
    assert sum(b["ranks"] for b in dist["histogram"]) == 40


def test_modified_z_flags_the_straggler_not_the_spread():
    steps = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 160.0]
    z = modified_z(steps)
    assert abs(z(160.0)) > 3.5 and all(abs(z(v)) < 3.5 for v in steps[:-1])
    assert modified_z([5.0, 5.0, 5.0])(5.0) == 0.0
    assert rank_distribution([]).median_ms is None


def test_ctrl_c_stops_the_run_and_cancels_the_cluster_tasks(dlrm, cluster, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    sources = sorted(dlrm.glob("*.json"))
    # hard links: distinct files, no disk used. ~11 ms of CPU per rank, so 4,000 ranks are ~20 s of work on
    # 2 workers, far longer than the poll below may take to see the tasks on a busy machine (with 400,
    # the run once finished before the signal was sent)
    for i in range(4000):
        os.link(sources[i % len(sources)], run / f"rank{i}.pt.trace.json")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), GPUWISE_TRACE_CACHE="off")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuwise", "trace", str(run), "--dask", cluster.scheduler_address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:

        def gpuwise_tasks() -> int:
            return client.run_on_scheduler(
                lambda dask_scheduler: sum(1 for k in dask_scheduler.tasks if "gpuwise-rank" in str(k))
            )

        deadline = time.monotonic() + 120
        while gpuwise_tasks() == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gpuwise_tasks() > 0, "the run never reached the cluster"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "Traceback" not in err, err
        deadline = time.monotonic() + 30
        while gpuwise_tasks() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert gpuwise_tasks() == 0


def test_a_worker_process_killed_mid_run_costs_no_rank_whose_file_is_good(dlrm, tmp_path, monkeypatch):
    import psutil

    from gpuwise.trace import parallel
    from gpuwise.trace.parallel import run_processes
    from gpuwise.trace.rank_summary import RankSummary

    retried: list[str] = []
    alone = parallel._alone

    def counting_alone(source, ctx, hashed):  # the real retry, counted
        retried.append(source)
        return alone(source, ctx, hashed)

    monkeypatch.setattr(parallel, "_alone", counting_alone)

    sources = [str(p) for p in rank_copies(sorted(dlrm.glob("*.json")), 24, tmp_path / "run")]
    outcomes = {}
    killed = 0
    for i, outcome in run_processes(sources, 2):
        outcomes[i] = outcome
        if (
            not killed
        ):  # after the first rank: kill a pool worker (a child of the forkserver) as the OOM killer would
            workers = [
                p
                for server in psutil.Process().children()
                if "forkserver" in " ".join(server.cmdline())
                for p in server.children()
            ]
            assert workers, "no pool worker found"
            workers[0].kill()
            killed += 1
    assert sorted(outcomes) == list(range(24))
    assert all(isinstance(o, RankSummary) for o in outcomes.values())
    assert 1 <= len(retried) <= 4  # the ranks in flight when the pool broke, each retried alone
