"""Many ranks at once: per-rank work in worker processes (or on Dask), cross-rank work on summaries.

`analyze_many` is `analyze_traces` for runs of many ranks. Each rank is summarized where the work runs
(`rank_summary.summarize`: one process of a local pool, ``--workers N``, or a task on an existing
``dask.distributed`` cluster, ``--dask ADDRESS``); the driver holds summaries only (a few KB per rank,
kernel names shared), takes unchanged ranks from the summary cache, and builds the same report as the
one-process path: the same findings and the same numbers whatever the engine
(tests/trace/test_trace_scale.py).

A rank whose worker fails (a bad file, out of memory, a worker process killed) is lost alone and named
among the skipped files; Ctrl-C stops the pool's processes or cancels the cluster's tasks.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpuwise.errors import GpuwiseError
from gpuwise.trace.analyze import FileProgress, SkippedFile, TraceReport, build_report, expand_paths
from gpuwise.trace.blas_threads import worker_init
from gpuwise.trace.rank import RankAnalysis
from gpuwise.trace.rank_summary import RankFailure, RankSummary, compact, is_url, summarize
from gpuwise.trace.summary_cache import SummaryCache, default_cache_path

if TYPE_CHECKING:  # the process pool is imported by the runs that use one (start-up of `--workers 1`)
    from concurrent.futures import Future, ProcessPoolExecutor

__all__ = [
    "Engine",
    "Outcome",
    "RunStats",
    "analyze_many",
    "default_workers",
    "expand_sources",
    "run_in_process",
    "run_processes",
]

Engine = Literal["in-process", "processes", "dask"]
Outcome = RankSummary | RankFailure
Runner = Callable[[list[str]], Iterator[tuple[int, Outcome]]]

# Without --workers, inputs smaller than this are analyzed in this process: starting a worker costs ~0.5 s of
# CPU (interpreter, numpy, the trace modules), what parsing ~30 MB of Kineto JSON costs (DLRM: 13-18 ms per
# 0.9 MB rank, benchmarks/trace_scale.py).
POOL_MIN_BYTES = 32_000_000

DIED = "the worker process died while analyzing this rank (killed: out of memory?); the other ranks are kept"


@dataclass
class RunStats:
    """How the ranks were analyzed: engine and workers, ranks taken from the cache / analyzed / lost, the
    CPU seconds the workers spent on the ranks and in all (start-up and waiting included: each worker
    process's CPU time at its last rank), the largest worker peak RSS (bytes), the driver's wall time."""

    engine: Engine
    workers: int | None  # None on Dask (the cluster decides)
    cached_ranks: int = 0
    analyzed_ranks: int = 0
    lost_ranks: int = 0
    worker_cpu_s: float = 0.0
    worker_process_cpu_s: dict[str, float] = field(default_factory=dict)  # host:pid -> CPU s
    worker_peak_rss_bytes: int = 0
    wall_s: float = 0.0
    cache_file: str | None = None

    def add(self, outcome: RankSummary) -> None:
        """Count one analyzed rank: its CPU seconds, its worker's CPU so far and peak RSS."""
        self.analyzed_ranks += 1
        self.worker_cpu_s += outcome.cpu_s
        seen = self.worker_process_cpu_s.get(outcome.worker, 0.0)
        self.worker_process_cpu_s[outcome.worker] = max(seen, outcome.worker_process_cpu_s)
        self.worker_peak_rss_bytes = max(self.worker_peak_rss_bytes, outcome.worker_peak_rss_bytes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the ``execution`` object of the trace document)."""
        return {
            "engine": self.engine,
            "workers": self.workers,
            "cached_ranks": self.cached_ranks,
            "analyzed_ranks": self.analyzed_ranks,
            "lost_ranks": self.lost_ranks,
            "worker_cpu_s": round(self.worker_cpu_s, 3),
            "worker_processes": len(self.worker_process_cpu_s),
            "worker_process_cpu_s": round(sum(self.worker_process_cpu_s.values()), 3),
            "worker_peak_rss_bytes": self.worker_peak_rss_bytes,
            "wall_s": round(self.wall_s, 3),
            "cache_file": self.cache_file,
        }


def default_workers() -> int:
    """The cores this process may run on (``--workers`` default)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def expand_sources(raw: list[str]) -> list[str]:
    """Local files and directories as `expand_paths` finds them; fsspec URLs (``s3://b/dir``) as given,
    a URL directory contributing its ``.json``/``.json.gz`` objects at any depth, in natural order."""
    from gpuwise.trace.analyze import is_trace_name, natural_key

    local = [item for item in raw if not is_url(item)]
    out = [str(p) for p in expand_paths(local)] if local else []
    for item in (item for item in raw if is_url(item)):
        fs, root = _url_fs(item)
        if not fs.isdir(root):
            out.append(item)
            continue
        found = [fs.unstrip_protocol(p) for p in fs.find(root) if is_trace_name(Path(p))]
        if not found:
            raise GpuwiseError(f"{item}: no .json or .json.gz trace files under this URL")
        out += sorted(found, key=lambda s: natural_key(Path(s)))
    return out


def _url_fs(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise GpuwiseError(f"{url}: reading URLs needs fsspec: pip install 'gpuwise[dask]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as err:  # s3:// without s3fs, an unknown protocol
        raise GpuwiseError(f"{url}: {err}") from None


def run_in_process(
    sources: list[str], progress: FileProgress | None = None, hashed: bool = True
) -> Iterator[tuple[int, Outcome]]:
    """Today's path: one rank after another in this process (``--workers 1``); ``hashed``: hash each file's
    content (the summary cache's key; False without a cache)."""
    for i, source in enumerate(sources):
        callback = (lambda n, i=i, s=source: progress(i, Path(s), n)) if progress else None
        yield i, summarize(source, callback, hashed)


def _context() -> Any:
    # forkserver on Linux: workers start clean of the driver's threads (rich's progress bar), and the
    # server ignores Ctrl-C (no preload: a preload would catch Ctrl-C mid-import and print a traceback)
    import multiprocessing

    return multiprocessing.get_context("forkserver" if sys.platform == "linux" else "spawn")


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the worker processes now (Ctrl-C, or the caller stopped reading)."""
    processes = list(getattr(pool, "_processes", {}).values())  # the pool has no public handle on them
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        proc.terminate()


def _drain(
    pool: ProcessPoolExecutor, sources: list[str], pending: deque[int], window: int, hashed: bool
) -> Iterator[tuple[int, Outcome]]:
    """Run ``pending`` on ``pool``, at most ``window`` tasks queued; on a broken pool, put the tasks in
    flight back at the front of ``pending`` and raise BrokenProcessPool."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    in_flight: dict[Future[Outcome], int] = {}
    while pending or in_flight:
        while pending and len(in_flight) < window:
            i = pending.popleft()
            in_flight[pool.submit(summarize, sources[i], None, hashed)] = i
        done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
        for fut in done:
            i = in_flight.pop(fut)
            try:
                outcome = fut.result()
            except BrokenProcessPool:
                pending.extendleft(sorted([i, *in_flight.values()], reverse=True))
                raise
            yield i, outcome


def run_processes(sources: list[str], workers: int, hashed: bool = True) -> Iterator[tuple[int, Outcome]]:
    """Ranks on a pool of ``workers`` processes, yielded as they finish (``hashed``: as `run_in_process`).
    When a worker process dies, the ranks it may have held are retried one at a time, each in a fresh
    process: the one that kills its process again is lost (and named), the others are kept."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    pending: deque[int] = deque(range(len(sources)))
    ctx = _context()
    while pending:
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=worker_init)
        suspects: list[int] = []
        try:
            yield from _drain(pool, sources, pending, 2 * workers, hashed)
        except BrokenProcessPool:
            suspects = [pending.popleft() for _ in range(min(len(pending), 2 * workers))]
        finally:
            _stop(pool)
        for i in suspects:
            yield i, _alone(sources[i], ctx, hashed)


def _alone(source: str, ctx: Any, hashed: bool) -> Outcome:
    """One rank in a process of its own: its outcome, or a failure if the process dies."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=worker_init)
    try:
        return pool.submit(summarize, source, None, hashed).result()
    except BrokenProcessPool:
        return RankFailure(source, DIED)
    finally:
        _stop(pool)


def analyze_many(
    paths: list[str],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    use_cache: bool = True,
    progress: FileProgress | None = None,
    strict: bool = False,
) -> tuple[TraceReport, RunStats]:
    """Files, directories or URLs in, one `TraceReport` out (as `analyze_traces` makes it) and how it was
    run. ``workers`` None means every core (this process alone for under POOL_MIN_BYTES of local files);
    1 (or a single file) runs in this process."""
    started = time.perf_counter()
    sources = expand_sources(paths)
    if workers is None:
        workers = 1 if _local_bytes(sources) < POOL_MIN_BYTES else default_workers()
    cache_path = default_cache_path() if use_cache else None
    runner, stats = _runner(sources, workers, dask_address, progress, hashed=cache_path is not None)
    cache = SummaryCache(cache_path) if cache_path is not None else None
    stats.cache_file = str(cache_path) if cache_path is not None else None
    try:
        on_done = None
        if progress is not None and stats.engine != "in-process":  # in one process: bytes, as they are read
            on_done = lambda k, source: progress(k, Path(source), 1 << 62)  # noqa: E731
        analyses, skipped = _collect(sources, runner, cache, stats, strict, on_done)
    finally:
        if cache is not None:
            cache.close()
    if not analyses:
        raise GpuwiseError(
            f"none of the {len(sources)} files is a readable trace (first: {skipped[0].reason})"
        )
    analyses.sort(key=lambda r: (r.rank.rank is None, r.rank.rank or 0))  # by rank number; unranked last
    report = build_report(analyses)
    report.skipped = skipped
    stats.wall_s = time.perf_counter() - started
    return report, stats


def _local_bytes(sources: list[str]) -> float:
    """Bytes of the local files (infinite when a URL is among them: remote reads gain from parallelism)."""
    total = 0
    for source in sources:
        if is_url(source):
            return float("inf")
        try:
            total += os.stat(source).st_size
        except OSError:
            continue
    return float(total)


def _runner(
    sources: list[str], workers: int, dask_address: str | None, progress: FileProgress | None, hashed: bool
) -> tuple[Runner, RunStats]:
    if workers < 1:
        raise GpuwiseError(f"--workers {workers}: give 1 or more processes (1 analyzes in this process)")
    if dask_address:
        from gpuwise.trace.dask_runner import run_dask

        return (lambda todo: run_dask(todo, dask_address, hashed)), RunStats("dask", None)
    if workers == 1 or len(sources) == 1:
        return (lambda todo: run_in_process(todo, progress, hashed)), RunStats("in-process", 1)
    used = min(workers, len(sources))
    return (lambda todo: run_processes(todo, used, hashed)), RunStats("processes", used)


def _cached(
    sources: list[str], cache: SummaryCache | None
) -> list[tuple[RankAnalysis, ...] | RankFailure | None]:
    """Per source, its cached ranks (local files unchanged since they were summarized), else None."""
    results: list[tuple[RankAnalysis, ...] | RankFailure | None] = [None] * len(sources)
    if cache is None:
        return results
    for i, source in enumerate(sources):
        if not is_url(source) and (key := cache.key_of(Path(source))) is not None:
            results[i] = cache.get(key)
    cache.commit()
    return results


def _collect(
    sources: list[str],
    runner: Runner,
    cache: SummaryCache | None,
    stats: RunStats,
    strict: bool,
    on_done: Callable[[int, str], None] | None = None,
) -> tuple[list[RankAnalysis], list[SkippedFile]]:
    """Every rank's analysis (cached or computed, in input order) and the files lost."""
    results = _cached(sources, cache)
    todo = [i for i, r in enumerate(results) if r is None]
    stats.cached_ranks = sum(len(r) for r in results if isinstance(r, tuple))
    fresh: list[tuple[str, str, tuple[RankAnalysis, ...]]] = []
    for k, (j, outcome) in enumerate(runner([sources[i] for i in todo])):
        i = todo[j]
        if on_done is not None:
            on_done(len(sources) - len(todo) + k, sources[i])
        if isinstance(outcome, RankFailure):
            if strict or len(sources) == 1:
                raise GpuwiseError(outcome.message or f"{outcome.file}: {outcome.reason}")
            results[i] = outcome
            continue
        results[i] = tuple(map(compact, outcome.analyses))  # an Nsight file of N processes: N ranks
        stats.add(outcome)
        if not is_url(sources[i]):
            fresh.append((sources[i], outcome.sha256, outcome.analyses))
    if cache is not None and fresh:
        cache.put_many(fresh)
    analyses = [a for r in results if isinstance(r, tuple) for a in r]
    skipped = [SkippedFile(r.file, r.reason) for r in results if isinstance(r, RankFailure)]
    stats.lost_ranks = len(skipped)
    return analyses, skipped
