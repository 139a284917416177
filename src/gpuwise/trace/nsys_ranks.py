"""One rank per process of an Nsight Systems export: `nsys profile` of a `torchrun` launch (or any
multi-process job) writes every process's CUDA activity into one file.

Each process with CUDA activity (kernels, copies, memsets or runtime calls; the OS pid is bits 24-47 of
``globalPid`` / ``globalTid``, as the Nsight schema documents) becomes its own event table: the export's
CUDA and NVTX tables are shadowed, for the duration of the read, by TEMP views holding only that
process's rows (SQLite looks names up in ``temp`` before ``main``), and the one reader
(:func:`gpuwise.trace.nsys.read_nsys_sqlite`'s schema handling) runs unchanged on them. Ranks are
numbered in pid order, and each table says which pid it is, so the cross-rank analysis (stragglers,
collective waits) works on one file as on one file per rank.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gpuwise.errors import GpuwiseError
from gpuwise.trace.event_rows import EventTable
from gpuwise.trace.nsys import Schema, _open, _read

__all__ = ["nsys_processes", "read_nsys_process"]

# table -> the column whose bits 24-47 are the OS pid
_PID_COLUMN = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "globalPid",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "globalPid",
    "CUPTI_ACTIVITY_KIND_MEMSET": "globalPid",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "globalTid",
    "NVTX_EVENTS": "globalTid",
}
_PID_BITS = '(("{col}" >> 24) & 16777215)'


def _present(schema: Schema) -> dict[str, str]:
    """The tables of this export that carry a pid column (table -> column)."""
    return {t: c for t, c in _PID_COLUMN.items() if t in schema.tables and c in schema.columns(t)}


def nsys_processes(path: Path) -> list[int]:
    """OS pids with CUDA activity in the export, ascending ([] when it cannot tell)."""
    try:
        with _open(path) as db:
            schema = Schema(db)
            tables = {t: c for t, c in _present(schema).items() if t != "NVTX_EVENTS"}
            pids: set[int] = set()
            for table, col in tables.items():
                pid = _PID_BITS.format(col=col)
                pids.update(r[0] for r in db.execute(f'SELECT DISTINCT {pid} FROM "{table}"') if r[0])
            return sorted(pids)
    except (sqlite3.DatabaseError, GpuwiseError):
        return []  # the full read reports what is wrong with the file


def read_nsys_process(path: Path, pid: int, rank: int, processes: int) -> EventTable:
    """The rows of process ``pid`` as rank ``rank`` of ``processes``."""
    with _open(path) as db:
        try:
            for table, col in _present(Schema(db)).items():
                db.execute(
                    f'CREATE TEMP VIEW "{table}" AS SELECT rowid AS rowid, * FROM main."{table}" '
                    f"WHERE {_PID_BITS.format(col=col)} = {int(pid)}"
                )
            events = _read(path, Schema(db))
        except sqlite3.DatabaseError as err:
            raise GpuwiseError(f"{path}: the Nsight SQLite export is damaged or incomplete ({err})") from None
    note = (
        f"process pid {pid}, rank {rank} of the {processes} processes with CUDA activity in this export "
        "(ranks numbered in pid order)"
    )
    events.metadata["distributedInfo"] = {"rank": rank, "world_size": processes}
    events.warnings = [*events.warnings, note]
    return events
