"""Many-rank `gpuwise trace`: wall time, CPU and peak RSS of the driver and the workers (issue #32).

Builds rank directories from PARAM's 8 real DLRM rank traces (param/dlrm_kineto of the third-party data,
0.9 MB each): rank r is a copy of trace r mod 8 whose ``distributedInfo`` says rank r of N. The copies are
written to a temporary directory (--tmp, default the system's) and deleted afterwards; none is committed.
Then each engine analyzes the directory in a fresh driver process, without the summary cache:

- ``workers=1``: one process, today's path;
- ``workers=2``: a local pool of 2 processes;
- ``dask``: a ``dask.distributed.LocalCluster`` of 2 worker processes (1 thread each), started here;
- ``workers=2 cached``: the pool again after a run that filled the summary cache (a second look).

Printed per run: wall seconds of the driver process (analysis and text report), the driver's CPU seconds
and peak RSS, the workers' CPU seconds (whole processes, start-up included), their CPU milliseconds per
rank analyzed (the ranks' own time) and largest peak RSS, the ranks analyzed and lost, and the 1-minute
load average when the run ended. Then the size of one rank's summary (pickled, and compressed as cached).
CPU seconds are printed beside wall time because the machine may be shared.

    python benchmarks/trace_scale.py [--ranks 1024 10000] [--engines w1 w2 dask cached] [--tmp DIR]

LAST line: {"ranks": {N: {engine: {"wall_s": ..., ...}}}, "summary_bytes": ..., "summary_cached_bytes": ...}
Targets (issue #32): 1,024 ranks in <= 15 s wall with 2 workers; 10,000 ranks with driver peak RSS <= 1 GB
and wall time linear in ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

from third_party import check, data_dir, missing_line  # noqa: E402

DLRM = "param/dlrm_kineto"
ENGINES = ("w1", "w2", "dask", "cached")
_RANK_RE = re.compile(rb'"distributedInfo": \{"backend": "nccl", "rank": \d+, "world_size": \d+\}')

# The driver: analyze, render the text report (as `gpuwise trace DIR` prints it), report figures as JSON.
DRIVER = r"""
import io, json, resource, sys, time
started = time.perf_counter()
from rich.console import Console
from gpuwise.report import trace_view
from gpuwise.report.terminal import render as render_document
from gpuwise.trace.parallel import analyze_many
args = json.loads(sys.argv[1])
report, stats = analyze_many([args["dir"]], workers=args["workers"], dask_address=args["dask"],
                             use_cache=args["cache"])
console = Console(file=io.StringIO(), width=120)
render_document(console, trace_view.report_document(report))
wall = time.perf_counter() - started
self = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "wall_s": round(wall, 2),
    "driver_cpu_s": round(self.ru_utime + self.ru_stime, 2),
    "driver_peak_rss_mb": round(self.ru_maxrss / 1024, 1),
    "worker_cpu_s": round(stats.worker_process_cpu_s and sum(stats.worker_process_cpu_s.values()) or 0.0, 2),
    "worker_rank_cpu_s": round(stats.worker_cpu_s, 2),
    "worker_peak_rss_mb": round(stats.worker_peak_rss_bytes / 2**20, 1),
    "worker_cpu_ms_per_rank": round(1000 * stats.worker_cpu_s / max(stats.analyzed_ranks, 1), 2),
    "ranks": len(report.ranks), "lost": len(report.skipped), "cached": stats.cached_ranks,
    "report_lines": console.file.getvalue().count("\n"),
}))
"""


def build(sources: list[Path], ranks: int, target: Path) -> int:
    """Write ``ranks`` rank files to ``target``; returns the bytes written."""
    texts = [p.read_bytes() for p in sources]
    total = 0
    for r in range(ranks):
        info = b'"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d}' % (r, ranks)
        data, n = _RANK_RE.subn(info, texts[r % len(texts)], count=1)
        if n != 1:
            raise SystemExit(f"{sources[r % len(texts)]}: no distributedInfo to rewrite")
        (target / f"rank{r}.pt.trace.json").write_bytes(data)
        total += len(data)
    return total


def drive(directory: Path, workers: int, dask: str | None, cache: Path | None) -> dict[str, object]:
    """One analysis in a fresh driver process; its figures."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), GPUWISE_TRACE_CACHE=str(cache) if cache else "off")
    args = {"dir": str(directory), "workers": workers, "dask": dask, "cache": cache is not None}
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(args)], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"driver failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def summary_sizes(source: Path) -> tuple[int, int]:
    """(pickled bytes, cached bytes) of one rank's summary."""
    import pickle

    from gpuwise.trace.rank_summary import RankSummary, summarize, summary_to_bytes

    outcome = summarize(str(source))
    assert isinstance(outcome, RankSummary)
    return len(pickle.dumps(outcome, 5)), len(summary_to_bytes(outcome.analysis))


def run_engines(directory: Path, engines: list[str], scratch: Path) -> dict[str, dict[str, object]]:
    """Every requested engine on one directory."""
    out: dict[str, dict[str, object]] = {}
    for engine in engines:
        if engine == "w1":
            out[engine] = drive(directory, 1, None, None)
        elif engine == "w2":
            out[engine] = drive(directory, 2, None, None)
        elif engine == "cached":
            cache = scratch / "summaries.sqlite"
            cache.unlink(missing_ok=True)
            drive(directory, 2, None, cache)  # fills the cache
            out[engine] = drive(directory, 2, None, cache)
        elif engine == "dask":
            out[engine] = _dask(directory)
        out[engine]["load_avg_1min"] = round(os.getloadavg()[0], 2)  # the machine may be shared: CPU s count
        print(f"  {engine:>6}: " + ", ".join(f"{k} {v}" for k, v in out[engine].items()), flush=True)
    return out


def _dask(directory: Path) -> dict[str, object]:
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit="4GiB"
    ) as cluster:
        return drive(directory, 2, cluster.scheduler_address, None)


def main() -> int:
    """Build each rank count's directory, run the engines on it, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 10000])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--root", type=Path, default=None, help="third-party data directory")
    parser.add_argument("--tmp", type=Path, default=None, help="where the rank directories are written")
    args = parser.parse_args()
    root = args.root or data_dir()
    if not root.is_dir() or check(root, DLRM):
        print(missing_line(root, "trace_scale"))
        return 0
    sources = sorted((root / DLRM).glob("*.json"))
    pickled, cached = summary_sizes(sources[0])
    print(
        f"one rank's summary: {pickled:,} bytes pickled, {cached:,} bytes cached (trace: "
        f"{sources[0].stat().st_size:,} bytes)"
    )
    figures: dict[str, dict[str, dict[str, object]]] = {}
    for ranks in args.ranks:
        scratch = Path(tempfile.mkdtemp(prefix=f"gpuwise-scale-{ranks}-", dir=args.tmp))
        try:
            directory = scratch / "ranks"
            directory.mkdir()
            size = build(sources, ranks, directory)
            print(f"{ranks:,} ranks ({size / 1e9:.2f} GB) in {directory}:", flush=True)
            figures[str(ranks)] = run_engines(directory, args.engines, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"ranks": figures, "summary_bytes": pickled, "summary_cached_bytes": cached}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
