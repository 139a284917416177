"""Per-rank summaries cached by content: a second look at 10,000 ranks reads summaries, not traces.

One SQLite file beside the run store (``trace-summaries.sqlite`` in the directory of ``GPUWISE_STORE``'s
file), or ``GPUWISE_TRACE_CACHE`` (a file path; ``off`` disables the cache, as ``--no-cache`` does).

- Key: the SHA-256 of the file's bytes (computed by the worker that read it) and the analysis code's
  version (a hash of the trace package's sources and gpuwise's version), so a changed gpuwise never reads
  a stale summary. A ``files`` table maps (path, size, mtime_ns) to that hash: an unchanged file is
  neither read nor hashed again; a touched or moved one is analyzed once more. Local files only.
- Bounded: at most ``GPUWISE_TRACE_CACHE_MB`` MB of summaries (default 256); the least recently used go
  first. Safe to delete at any time: it only holds what re-analysis would compute again.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from gpuwise.errors import GpuwiseError
from gpuwise.trace.rank import RankAnalysis
from gpuwise.trace.rank_summary import summary_from_bytes, summary_to_bytes

__all__ = [
    "CACHE_ENV",
    "CACHE_MB_ENV",
    "DEFAULT_MAX_MB",
    "SummaryCache",
    "code_version",
    "default_cache_path",
]

CACHE_ENV = "GPUWISE_TRACE_CACHE"
CACHE_MB_ENV = "GPUWISE_TRACE_CACHE_MB"
DEFAULT_MAX_MB = 256  # ~50,000 DLRM-size ranks at ~5 KB each

_SCHEMA = """
CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, blob BLOB NOT NULL, bytes INTEGER NOT NULL,
                                      used_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                                  sha256 TEXT NOT NULL);
"""


def default_cache_path() -> Path | None:
    """``GPUWISE_TRACE_CACHE`` (None when it says ``off``), else ``trace-summaries.sqlite`` beside the run
    store."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env.lower() in ("off", "0", "no", "false"):
        return None
    if env:
        return Path(env).expanduser()
    from gpuwise.store.paths import default_store_path

    return default_store_path().parent / "trace-summaries.sqlite"


@cache
def code_version() -> str:
    """A hash of gpuwise's version and every source file of the trace package and the diagnose thresholds
    (what a summary is computed by): a new gpuwise or a local edit makes old summaries unreachable."""
    import hashlib  # on use: a first look loads it after the parse (peak RSS), --no-cache never

    import gpuwise
    from gpuwise._version import __version__

    root = Path(gpuwise.__file__).parent
    digest = hashlib.sha256(__version__.encode())
    for path in sorted([*root.joinpath("trace").glob("*.py"), root / "diagnose" / "thresholds.py"]):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _max_bytes() -> int:
    raw = os.environ.get(CACHE_MB_ENV, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        raise GpuwiseError(
            f"{CACHE_MB_ENV}={raw!r} is not a number of MB (unset it for {DEFAULT_MAX_MB})"
        ) from None
    return int(mb * 1e6)


class SummaryCache:
    """The cache file, opened for one analysis: look keys up in bulk, store new summaries in one
    transaction, then trim to the bound."""

    def __init__(self, path: Path, max_bytes: int | None = None) -> None:
        self.path = path
        self.max_bytes = _max_bytes() if max_bytes is None else max_bytes
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30)
            # No fsync per write (each cost 10-50 ms of wall time, more than analyzing a small trace): the
            # write-ahead log with synchronous=NORMAL syncs only at checkpoints, and a power loss may drop the
            # last summaries written but never corrupts the file (SQLite's "WAL mode" durability note).
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as err:
            raise GpuwiseError(
                f"{path}: cannot open the trace summary cache ({err}): delete the file, or pass --no-cache"
            ) from err

    def close(self) -> None:
        """Close the database file."""
        self._db.close()

    def key_of(self, path: Path) -> str | None:
        """The cache key of a local file whose (size, mtime) match the content hash recorded when a worker
        last read it, else None (the file is analyzed, and its hash recorded, again)."""
        try:
            st = path.stat()
        except OSError:
            return None
        row = self._db.execute(
            "SELECT size, mtime_ns, sha256 FROM files WHERE path = ?", (str(path.resolve()),)
        ).fetchone()
        if row is None or row[0] != st.st_size or row[1] != st.st_mtime_ns:
            return None
        return self.key(str(row[2]))

    @staticmethod
    def key(sha256: str) -> str:
        """The summary key of a file's content hash: the code version, then the hash."""
        return f"{code_version()}:{sha256}"

    def get(self, key: str) -> tuple[RankAnalysis, ...] | None:
        """The cached ranks of the file for ``key`` (one, or one per process of an Nsight export), or None
        (a summary that no longer loads is dropped)."""
        row = self._db.execute("SELECT blob FROM summaries WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            analyses = summary_from_bytes(row[0])
        except Exception:  # written by another gpuwise whose classes differ: recompute it
            self._db.execute("DELETE FROM summaries WHERE key = ?", (key,))
            return None
        self._db.execute("UPDATE summaries SET used_at = ? WHERE key = ?", (time.time(), key))
        return analyses

    def put_many(self, items: Iterable[tuple[str, str, tuple[RankAnalysis, ...]]]) -> None:
        """Store (local path, content hash, the file's ranks) triples, then evict the least recently used
        beyond the bound; one transaction."""
        now = time.time()
        rows, files = [], []
        for path, sha, analyses in items:
            blob = summary_to_bytes(analyses)
            rows.append((self.key(sha), blob, len(blob), now))
            try:
                st = Path(path).stat()
            except OSError:
                continue
            files.append((str(Path(path).resolve()), st.st_size, st.st_mtime_ns, sha))
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?)", rows)
            self._db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", files)
            self._trim()

    def commit(self) -> None:
        """Write the use times gathered by `get`, and keep to the bound (it may have been lowered)."""
        with self._db:
            self._trim()

    def _trim(self) -> None:
        total = self._db.execute("SELECT COALESCE(SUM(bytes), 0) FROM summaries").fetchone()[0]
        if total <= self.max_bytes:
            return
        excess = total - int(0.9 * self.max_bytes)  # trim to 90 % so the next run does not trim again
        dropped = 0
        for key, size in self._db.execute("SELECT key, bytes FROM summaries ORDER BY used_at").fetchall():
            if dropped >= excess:
                break
            self._db.execute("DELETE FROM summaries WHERE key = ?", (key,))
            dropped += size
        self._db.execute(
            "DELETE FROM files WHERE ? || ':' || sha256 NOT IN (SELECT key FROM summaries)", (code_version(),)
        )
