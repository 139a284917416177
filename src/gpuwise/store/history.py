"""The monitor's history: one SQLite file, ``monitor.sqlite`` beside the run store's ``runs.sqlite``.

A separate file, not tables in ``runs.sqlite``: a recorder commits every second for months, and its WAL
and checkpoints must never hold a lock that `gpuwise runs` or `gpuwise profile` waits on; its retention
and size are its own (delete the file, lose only the history). WAL mode: one writer (the recorder),
any number of readers (`monitor report`) that never block it. Each tick is one transaction, so a killed
recorder loses at most the tick it was writing.

Rows are compact (the 30-day × 8-GPU budget is 50 MB): times and intervals in integer ms, memory in
MiB, power in mW, the energy counter in mJ as NVML gives it; the key (tier, t, gpu) makes every insert
an append. Tier 0 is raw samples, 1 and 2 the 1-min and 1-h aggregates (`tiers.py`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.store.paths import default_history_path

SCHEMA_VERSION = 1
MIB = 2**20
_SCHEMA = """
CREATE TABLE IF NOT EXISTS gpus (
    id                 INTEGER PRIMARY KEY,
    hostname           TEXT NOT NULL,
    gpu_key            TEXT NOT NULL,   -- the UUID, else 'index:N'
    gpu_index          INTEGER NOT NULL,
    uuid               TEXT,
    name               TEXT NOT NULL,
    memory_total_bytes INTEGER,
    energy_counter     INTEGER NOT NULL DEFAULT 0,  -- 1: NVML total-energy counter seen
    UNIQUE (hostname, gpu_key)
);
CREATE TABLE IF NOT EXISTS samples (
    tier      INTEGER NOT NULL,  -- 0 raw, 1 one minute, 2 one hour
    t_ms      INTEGER NOT NULL,  -- end of the interval the row stands for
    gpu       INTEGER NOT NULL,
    read_ms   INTEGER NOT NULL,  -- readable time in the interval
    lost_ms   INTEGER,           -- time the GPU could not be read (NULL: none)
    n         INTEGER,           -- samples aggregated (NULL: a raw row)
    busy_pct  REAL,              -- mean
    mem_mib   INTEGER,           -- max
    power_mw  INTEGER,           -- mean
    energy_mj INTEGER,           -- the NVML counter at the end (last)
    energy_j  REAL,              -- energy in the interval from counter deltas (aggregates only)
    temp_c    INTEGER,           -- max
    reasons   INTEGER,           -- raw: NVML clock-event reason mask
    throttle  TEXT,              -- aggregates: {"reason": seconds} (NULL: none)
    PRIMARY KEY (tier, t_ms, gpu)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS procs (
    id   INTEGER PRIMARY KEY,
    pid  INTEGER NOT NULL,
    user TEXT,
    name TEXT,
    UNIQUE (pid, user, name)
);
CREATE TABLE IF NOT EXISTS proc_samples (
    tier     INTEGER NOT NULL,
    t_ms     INTEGER NOT NULL,
    gpu      INTEGER NOT NULL,
    proc     INTEGER NOT NULL,
    read_ms  INTEGER NOT NULL,  -- time present
    mem_mib  INTEGER,           -- max
    sm_pct   REAL,              -- mean of the samples NVML gave
    PRIMARY KEY (tier, t_ms, gpu, proc)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# Added after schema 1 shipped, so created on every writable open (IF NOT EXISTS); a store without it
# (an older recorder) has no recorded gaps and the report finds them between samples instead.
_GAPS = """
CREATE TABLE IF NOT EXISTS gaps (
    gpu       INTEGER NOT NULL,
    start_ms  INTEGER NOT NULL,  -- the end of the last sample before (Unix ms)
    end_ms    INTEGER NOT NULL,  -- the start of the first sample after
    before_mj INTEGER,           -- the energy counter at the sample before (NULL: not read)
    after_mj  INTEGER,           -- ... at the sample after (its time: after_t_ms)
    after_t_ms INTEGER NOT NULL,
    PRIMARY KEY (gpu, end_ms)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class GpuRow:
    """One GPU the history has seen (a host's GPU, keyed by UUID, else by index); `id` keys its samples."""

    id: int
    hostname: str
    gpu_index: int
    uuid: str | None
    name: str
    memory_total_bytes: int | None
    energy_counter: bool


def lock_path(path: Path) -> Path:
    """The writer's lock file beside the history (``monitor.sqlite.lock``): holds the recorder's pid."""
    return path.with_name(path.name + ".lock")


class WriterLock:
    """One recorder per store: an exclusive ``flock`` on ``<store>.lock`` that holds the writer's pid.

    The kernel drops the lock when the process ends however it ends (kill -9, a crash), so a dead
    recorder never blocks the next one; a second recorder on the same store would double every GPU-hour,
    so it is refused (GpuwiseError naming the first one's pid, exit 2 at the CLI)."""

    def __init__(self, path: Path) -> None:
        self.path = lock_path(path)
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise GpuwiseError(f"cannot create the recorder lock {self.path}: {err.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(self._fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = None
            raise GpuwiseError(
                f"another recorder (pid {holder}) already writes {path}: stop it, or record into another "
                "file with --store"
            ) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        """Drop the lock (the file stays: removing it could race a recorder that is taking it)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class HistoryStore:
    """The connection and the few statements every part shares (writer, downsampler, reader)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn
        self.writer_lock: WriterLock | None = None
        self._gpu_ids: dict[tuple[str, str], int] = {}
        self._proc_ids: dict[tuple[int, str | None, str | None], int] = {}
        self._has_counter: set[int] = set()

    @classmethod
    def open(cls, path: Path | None = None, create: bool = True, writer: bool = False) -> HistoryStore:
        """Open the history at `path` (default `default_history_path()`) in WAL mode; with `create`, make
        the file and its schema; with `writer`, take the store's `WriterLock` first (a recorder: one per
        store). A clear GpuwiseError for a missing, newer or unreadable file, or a store already written."""
        path = path or default_history_path()
        if not create and not path.exists():
            raise GpuwiseError(f"no monitor history at {path} (record one with `gpuwise monitor --record`)")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise GpuwiseError(f"cannot create the directory of {path}: {err.strerror}") from None
        lock = WriterLock(path) if writer else None
        try:
            store = cls._connect(path, create)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        store.writer_lock = lock
        return store

    @classmethod
    def _connect(cls, path: Path, create: bool) -> HistoryStore:
        try:
            conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "PRAGMA synchronous=NORMAL"
            )  # WAL + NORMAL: a killed process loses nothing committed
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise GpuwiseError(
                    f"{path}: monitor history schema {version} is newer than this gpuwise ({SCHEMA_VERSION})"
                )
            if version == 0 and create:
                conn.executescript(_SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};")
            if create:
                conn.executescript(_GAPS)
            conn.execute("SELECT count(*) FROM gpus").fetchone()
        except sqlite3.OperationalError as err:
            raise GpuwiseError(f"cannot open the monitor history {path}: {err}") from None
        except sqlite3.DatabaseError as err:
            raise GpuwiseError(
                f"{path} is not a readable monitor history ({err}); move it aside and record again"
            ) from None
        return cls(path, conn)

    def close(self) -> None:
        """Close the connection and drop the writer's lock if this store holds it."""
        self.conn.close()
        if self.writer_lock is not None:
            self.writer_lock.release()
            self.writer_lock = None

    # --- identities -------------------------------------------------------------------------------
    def gpu_id(self, hostname: str, index: int, uuid: str | None, name: str, total_bytes: int | None) -> int:
        """The row id of a GPU (inserted, or its name, index and memory updated, on first sight; cached)."""
        key = (hostname, uuid or f"index:{index}")
        if key in self._gpu_ids:
            return self._gpu_ids[key]
        self.conn.execute(
            "INSERT INTO gpus (hostname, gpu_key, gpu_index, uuid, name, memory_total_bytes) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hostname, gpu_key) DO UPDATE SET "
            "gpu_index=excluded.gpu_index, name=excluded.name, "
            "memory_total_bytes=coalesce(excluded.memory_total_bytes, memory_total_bytes)",
            (*key, index, uuid, name, total_bytes),
        )
        row = self.conn.execute("SELECT id FROM gpus WHERE hostname=? AND gpu_key=?", key).fetchone()
        self._gpu_ids[key] = int(row[0])
        return self._gpu_ids[key]

    def last_identity(self, hostname: str, index: int) -> tuple[str | None, str] | None:
        """(UUID, name) of the GPU last recorded at this host's `index` (the newest row); None if never."""
        try:
            row = self.conn.execute(
                "SELECT uuid, name FROM gpus WHERE hostname=? AND gpu_index=? AND name != '' "
                "ORDER BY id DESC LIMIT 1",
                (hostname, index),
            ).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else (row[0], str(row[1]))

    def mark_energy_counter(self, gpu: int) -> None:
        """Record that GPU `gpu` has NVML's total-energy counter (energy is then measured, not unknown)."""
        if gpu not in self._has_counter:
            self.conn.execute("UPDATE gpus SET energy_counter=1 WHERE id=?", (gpu,))
            self._has_counter.add(gpu)

    def proc_id(self, pid: int, user: str | None, name: str | None) -> int:
        """The row id of a process (pid, user, name), inserted on first sight; cached."""
        key = (pid, user, name)
        if key in self._proc_ids:
            return self._proc_ids[key]
        self.conn.execute("INSERT OR IGNORE INTO procs (pid, user, name) VALUES (?, ?, ?)", key)
        row = self.conn.execute(
            "SELECT id FROM procs WHERE pid=? AND user IS ? AND name IS ?", key
        ).fetchone()
        self._proc_ids[key] = int(row[0])
        return self._proc_ids[key]

    def gpus(self) -> list[GpuRow]:
        """Every GPU the history has seen, by host then index."""
        rows = self.conn.execute(
            "SELECT id, hostname, gpu_index, uuid, name, memory_total_bytes, energy_counter FROM gpus "
            "ORDER BY hostname, gpu_index"
        ).fetchall()
        return [GpuRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in rows]

    def procs(self) -> dict[int, tuple[int, str | None, str | None]]:
        """Process row id → (pid, user, name)."""
        return {r[0]: (r[1], r[2], r[3]) for r in self.conn.execute("SELECT id, pid, user, name FROM procs")}

    def last_sample(self, gpu: int) -> tuple[int, int | None] | None:
        """(end ms, energy counter mJ) of `gpu`'s latest row in any tier (where a restarted recorder's
        gap begins); None when the GPU has none. Each tier is read from its end: no scan."""
        found = None
        for tier in (0, 1, 2):
            row = self.conn.execute(
                "SELECT t_ms, energy_mj FROM samples WHERE tier=? AND gpu=? ORDER BY t_ms DESC LIMIT 1",
                (tier, gpu),
            ).fetchone()
            if row is not None and (found is None or row[0] > found[0]):
                found = (int(row[0]), None if row[1] is None else int(row[1]))
        return found

    def add_gap(self, gpu: int, start_ms: int, end_ms: int, before_mj: int | None, after: tuple) -> None:
        """Record that nothing was sampled on `gpu` from `start_ms` to `end_ms`, with the energy counter
        at both sides (`after`: the sample after, (t ms, mJ or None))."""
        self.conn.execute(
            "INSERT OR REPLACE INTO gaps VALUES (?, ?, ?, ?, ?, ?)",
            (gpu, start_ms, end_ms, before_mj, after[1], after[0]),
        )

    def gaps(self, lo_ms: int, hi_ms: int) -> list[tuple[int, int, int, int | None, int | None, int]]:
        """Recorded gaps overlapping (lo, hi]: (gpu, start ms, end ms, before mJ, after mJ, after t ms);
        [] for a store recorded before gaps were (no table)."""
        try:
            return self.conn.execute(
                "SELECT gpu, start_ms, end_ms, before_mj, after_mj, after_t_ms FROM gaps "
                "WHERE end_ms > ? AND start_ms < ? ORDER BY gpu, start_ms",
                (lo_ms, hi_ms),
            ).fetchall()
        except sqlite3.OperationalError:
            return []

    def has_gap_table(self) -> bool:
        """True when this store records gaps (written by a recorder that knows them)."""
        row = self.conn.execute("SELECT 1 FROM sqlite_master WHERE name='gaps'").fetchone()
        return row is not None

    # --- bookkeeping ----------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        """A bookkeeping value (text, JSON for non-strings); None when unset."""
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        """Set a bookkeeping value (strings as they are, anything else as JSON)."""
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
            (key, json.dumps(value) if not isinstance(value, str) else value),
        )

    def time_range_ms(self, tier: int) -> tuple[int, int] | None:
        """(first, last) sample end time in Unix ms in `tier`; None when the tier is empty."""
        # two subqueries: SQLite answers a lone min() or max() from the key, both together by a scan
        row = self.conn.execute(
            "SELECT (SELECT min(t_ms) FROM samples WHERE tier=?), "
            "(SELECT max(t_ms) FROM samples WHERE tier=?)",
            (tier, tier),
        ).fetchone()
        return None if row[0] is None else (int(row[0]), int(row[1]))

    def size_bytes(self) -> int:
        """Bytes on disk of the file with its WAL and shared-memory siblings."""
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())


__all__ = [
    "MIB",
    "SCHEMA_VERSION",
    "GpuRow",
    "HistoryStore",
    "WriterLock",
    "default_history_path",
    "lock_path",
]
