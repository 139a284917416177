"""One rank's summary: what a worker (a local process or a Dask worker) sends back instead of events.

A `RankSummary` carries one rank's `RankAnalysis` (breakdown, top kernels and per-name kernel times, step
times, collective timings, copies, syncs, launches: everything the findings and the cross-rank comparison
read, no event; further ranks of the same file in ``more``), the worker's CPU seconds and peak RSS, and
nothing else: about 35 KB pickled for a DLRM
rank of 0.9 MB (5 KB compressed in the summary cache). A rank that cannot be analyzed comes back as a
`RankFailure` naming the file and why, so one bad rank (cut file, out of memory) loses only itself.

`summarize` runs in the worker; it reads local paths directly and fsspec URLs (``s3://``, ``gs://``,
``file://``...) through a temporary local copy, so the files are read where the workers see them.
"""

from __future__ import annotations

import os
import pickle
import resource
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.trace.rank import RankAnalysis

__all__ = [
    "RankFailure",
    "RankSummary",
    "compact",
    "content_hash",
    "is_url",
    "summarize",
    "summary_from_bytes",
    "summary_to_bytes",
]

_PICKLE_PROTOCOL = 5


@cache
def _host() -> str:
    """This machine's name, asked once, when a summary is made (not at import: start-up time). POSIX
    uname's node name is what gethostname returns, without importing `socket`."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


@dataclass
class RankFailure:
    """A rank that could not be analyzed: its file, the reason (one line, no traceback) and the error's
    whole message (what a one-file run prints)."""

    file: str
    reason: str
    message: str = ""


@dataclass
class RankSummary:
    """One rank's analysis as a worker returns it, with the worker's CPU seconds spent on it, the
    worker process's peak RSS (bytes) and whole CPU seconds so far (start-up included), which worker
    (host:pid), and the file's content hash."""

    analysis: RankAnalysis
    cpu_s: float
    worker_peak_rss_bytes: int
    sha256: str  # of the file's bytes: the summary cache's key
    worker: str = ""
    worker_process_cpu_s: float = 0.0
    more: tuple[RankAnalysis, ...] = ()  # further ranks of the same file (an Nsight export of N processes)

    @property
    def file(self) -> str:
        """The trace file (path or URL) as given."""
        return self.analysis.file

    @property
    def analyses(self) -> tuple[RankAnalysis, ...]:
        """Every rank the file holds, in the file's order (one, or one per process of an Nsight export)."""
        return (self.analysis, *self.more)


def is_url(source: str) -> bool:
    """Is ``source`` an fsspec URL (``s3://bucket/key``) rather than a local path?"""
    return "://" in source and not source.startswith("file://")


def _peak_rss_bytes() -> int:
    """This process's peak RSS in bytes (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def content_hash(path: Path) -> str:
    """SHA-256 of the file's bytes (hex; ~1 GB/s, read again from the page cache right after parsing)."""
    import hashlib  # here, after the parse: OpenSSL's ~3.6 MB are mapped once the parse's peak is past

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _analyze_local(
    path: Path, progress: Callable[[int], None] | None = None, hashed: bool = True
) -> tuple[list[RankAnalysis], str]:
    from gpuwise.trace.analyze import _analyze_one  # the same checks as the one-process path

    analyses = _analyze_one(path, progress)
    return analyses, content_hash(path) if hashed else ""


def _analyze_url(url: str, hashed: bool = True) -> tuple[list[RankAnalysis], str]:
    """Copy the object to a local temporary file (same name, so the format is told as for a local file)."""
    import fsspec

    name = url.rstrip("/").rsplit("/", 1)[-1]
    with tempfile.TemporaryDirectory(prefix="gpuwise-rank-") as tmp:
        local = Path(tmp) / name
        with fsspec.open(url, "rb") as src, open(local, "wb") as dst:
            while chunk := src.read(8 << 20):
                dst.write(chunk)
        analyses, sha = _analyze_local(local, hashed=hashed)
    for analysis in analyses:
        analysis.file = url
    return analyses, sha


def summarize(
    source: str, progress: Callable[[int], None] | None = None, hashed: bool = True
) -> RankSummary | RankFailure:
    """Analyze one rank's trace (a local path or an fsspec URL) in this process: its summary, or the
    reason it could not be analyzed. Never raises for a bad file, so a worker loses only this rank.
    ``progress`` (local files) is called with the bytes read so far. ``hashed=False`` (no summary cache
    to fill) skips the content hash of a local file (``sha256`` is then ""; ~1 ms per MB)."""
    started = time.process_time()
    try:
        if source.startswith("file://"):
            source = source.removeprefix("file://")
        if is_url(source):
            analyses, sha = _analyze_url(source, hashed)
        else:
            analyses, sha = _analyze_local(Path(source), progress, hashed)
    except GpuwiseError as err:
        return RankFailure(source, str(err).removeprefix(f"{source}: "), str(err))
    except MemoryError:
        return RankFailure(source, "out of memory while analyzing this rank (give the workers more memory)")
    except (OSError, ImportError) as err:
        return RankFailure(source, f"cannot be read here ({type(err).__name__}: {err})")
    except Exception as err:  # a bug on one odd rank must not cost the other ranks
        return RankFailure(source, f"analysis failed ({type(err).__name__}: {err}); please report it")
    done = time.process_time()
    first, *more = analyses
    worker = f"{_host()}:{os.getpid()}"
    return RankSummary(first, done - started, _peak_rss_bytes(), sha, worker, done, tuple(more))


def compact(analysis: RankAnalysis) -> RankAnalysis:
    """Share the kernel-name strings between ranks (interned), so the driver holds each name once, not
    once per rank: 10,000 ranks of ~80 templated names each otherwise hold ~300 MB of copies."""
    kernels = analysis.kernels
    kernels.by_name_us = {sys.intern(name): us for name, us in kernels.by_name_us.items()}
    for k in kernels.top:
        k.name = sys.intern(k.name)
    return analysis


def summary_to_bytes(analyses: RankAnalysis | tuple[RankAnalysis, ...]) -> bytes:
    """The compressed pickle one file's ranks are cached as (zlib level 1: ~5 KB for a DLRM rank); a file
    of one rank is its analysis alone, a file of several (an Nsight export of N processes) their tuple."""
    if isinstance(analyses, tuple) and len(analyses) == 1:
        analyses = analyses[0]
    return zlib.compress(pickle.dumps(analyses, _PICKLE_PROTOCOL), 1)


def summary_from_bytes(blob: bytes) -> tuple[RankAnalysis, ...]:
    """The ranks cached by `summary_to_bytes`, in the file's order (the cache is the user's own file,
    written by gpuwise)."""
    value: Any = pickle.loads(zlib.decompress(blob))  # our own cache file, keyed by content
    if isinstance(value, RankAnalysis):
        return (value,)
    if isinstance(value, tuple) and value and all(isinstance(v, RankAnalysis) for v in value):
        return value
    raise ValueError("not a rank summary")
