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

import json
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


class HistoryStore:
    """The connection and the few statements every part shares (writer, downsampler, reader)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn
        self._gpu_ids: dict[tuple[str, str], int] = {}
        self._proc_ids: dict[tuple[int, str | None, str | None], int] = {}
        self._has_counter: set[int] = set()

    @classmethod
    def open(cls, path: Path | None = None, create: bool = True) -> HistoryStore:
        """Open the history at `path` (default `default_history_path()`) in WAL mode; with `create`, make
        the file and its schema. A clear GpuwiseError for a missing, newer or unreadable file."""
        path = path or default_history_path()
        if not create and not path.exists():
            raise GpuwiseError(f"no monitor history at {path} (record one with `gpuwise monitor --record`)")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise GpuwiseError(f"cannot create the directory of {path}: {err.strerror}") from None
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
            conn.execute("SELECT count(*) FROM gpus").fetchone()
        except sqlite3.OperationalError as err:
            raise GpuwiseError(f"cannot open the monitor history {path}: {err}") from None
        except sqlite3.DatabaseError as err:
            raise GpuwiseError(
                f"{path} is not a readable monitor history ({err}); move it aside and record again"
            ) from None
        return cls(path, conn)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

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


__all__ = ["MIB", "SCHEMA_VERSION", "GpuRow", "HistoryStore", "default_history_path"]
