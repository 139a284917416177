"""Nsight Systems exports (``nsys export --type sqlite``) read into the analyzer's event table.

What is read (tables are created lazily by ``nsys``, and columns differ between releases, so each is
looked up first and a missing one is skipped with a note):

- ``CUPTI_ACTIVITY_KIND_KERNEL``: kernels (name from ``StringIds``: demangled, else short name), device,
  stream, correlation id, process;
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET``: copies with direction and memory kinds (pageable vs
  pinned: ``ENUM_CUDA_MEMCPY_OPER`` / ``ENUM_CUDA_MEM_KIND`` when the file has them, else the values
  the Nsight schema documents), bytes;
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: runtime and driver calls (``cudaMemcpy_v3020`` → ``cudaMemcpy``; the
  2022 releases store some calls twice under one correlation id, kept once);
- ``NVTX_EVENTS``: ranges (host annotations), steps from ``ProfilerStep#N`` ranges, from gpuwise's own
  ``gpuwise.step N`` marks (``gpuwise profile``), or from the user's ranges named like ``step 12``;
  gpuwise's ``gpuwise.data_wait`` ranges as the input-pipeline wait;
- ``TARGET_INFO_GPU``: device name, memory, compute capability; ``EXPORT_META_DATA`` /
  ``META_DATA_EXPORT``: the Nsight release; ``TARGET_INFO_SYSTEM_ENV``: the rank (``RANK``,
  ``PMI_RANK``, ``OMPI_COMM_WORLD_RANK``, ``SLURM_PROCID``) when the environment was recorded.

Not read: OS runtime calls, CPU sampling, GPU metrics, CUDA graphs' node structure, unified-memory
faults, ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (no device memory peak). Times: ns in the file, µs in the table.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from gpuwise.errors import GpuwiseError
from gpuwise.trace.event_rows import RowBuilder, SourceInfo
from gpuwise.trace.nsys_nvtx import read_nvtx
from gpuwise.trace.table import EventTable

__all__ = ["MEMCPY_OPER", "MEM_KIND", "read_nsys_sqlite"]

# The Nsight schema's documented enums (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND), for files without
# those tables; spelled as CUPTI spells them in Kineto's copy names (no spaces: one word each).
MEMCPY_OPER = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA"}
MEMCPY_OPER |= {8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}  # 11-13: unified memory
MEM_KIND = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "DeviceStatic"}
MEM_KIND |= {6: "ManagedStatic", 7: "Unknown"}
_OPER_WORDS = {"host-to-device": "HtoD", "device-to-host": "DtoH", "device-to-device": "DtoD"}
_OPER_WORDS |= {"host-to-host": "HtoH", "peer-to-peer": "PtoP"}
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_RANK_ENV = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
_WORLD_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")
_NSIGHT_TABLES = {"StringIds", "EXPORT_META_DATA", "META_DATA_EXPORT", "NVTX_EVENTS", "TARGET_INFO_GPU"}
_NSIGHT_TABLES |= {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY"}
STREAM_PER_DEVICE = 1_000_000  # stream ids of device d become d * this + stream when a file has several


class Schema:
    """The tables and columns one export has, and its string table."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.tables = {r[0] for r in rows}
        self._columns: dict[str, set[str]] = {}
        self.strings: dict[int, str] = {}
        if "StringIds" in self.tables:
            self.strings = dict(db.execute("SELECT id, value FROM StringIds").fetchall())

    def columns(self, table: str) -> set[str]:
        """Column names of ``table`` (empty when the export has no such table)."""
        if table not in self._columns:
            rows = self.db.execute(f'PRAGMA table_info("{table}")').fetchall() if table in self.tables else []
            self._columns[table] = {r[1] for r in rows}
        return self._columns[table]

    def text(self, value: Any) -> str:
        """A name column's value: a StringIds id (most releases) or the text itself."""
        if isinstance(value, int):
            return self.strings.get(value, f"<string {value}>")
        return "" if value is None else str(value)

    def enum(self, table: str, fallback: dict[int, str]) -> dict[int, str]:
        """An ENUM_* table as id -> label when present (newer releases), else the documented values."""
        if table not in self.tables or not {"id", "label"} <= self.columns(table):
            return fallback
        out = dict(fallback)
        for key, label in self.db.execute(f'SELECT id, label FROM "{table}"').fetchall():
            text = str(label)
            out[int(key)] = _OPER_WORDS.get(text.lower(), text.replace(" ", ""))
        return out


@contextmanager
def _open(path: Path) -> Iterator[sqlite3.Connection]:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        db.text_factory = lambda b: b.decode("utf-8", "replace")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as err:
        raise GpuwiseError(f"{path}: cannot read the SQLite file ({err})") from None
    with closing(db):
        yield db


def read_nsys_sqlite(path: Path) -> EventTable:
    """One Nsight Systems SQLite export as an `EventTable` (all processes and devices of the file)."""
    with _open(path) as db:
        try:
            return _read(path, Schema(db))
        except sqlite3.DatabaseError as err:
            raise GpuwiseError(f"{path}: the Nsight SQLite export is damaged or incomplete ({err})") from None


def _read(path: Path, schema: Schema) -> EventTable:
    release = _release(schema)
    if not schema.tables & _NSIGHT_TABLES:
        names = ", ".join(sorted(schema.tables)[:6]) or "none"
        raise GpuwiseError(
            f"{path}: not a profiler trace gpuwise reads: "
            f"a SQLite file without Nsight Systems tables (tables: {names})"
        )
    if (
        "CUPTI_ACTIVITY_KIND_KERNEL" not in schema.tables
        and "CUPTI_ACTIVITY_KIND_RUNTIME" not in schema.tables
    ):
        raise GpuwiseError(
            f"{path}: an Nsight Systems export ({release or 'release unknown'}) without CUDA activity "
            "(no CUPTI_ACTIVITY_KIND_KERNEL or _RUNTIME table): profile with `nsys profile --trace=cuda,nvtx`"
        )
    builder, notes = RowBuilder(), list[str]()
    ids = _Ids()
    devices = _device_ops(schema, builder, ids, notes)  # device rows first: row 0 is never a launch
    _runtime(schema, builder, ids, notes)
    notes += read_nvtx(schema, builder, _tid_label)
    if len(ids.pids) > 1:
        notes.append(
            f"{len(ids.pids)} processes with CUDA activity in one file (pids "
            f"{', '.join(str(p) for p in sorted(ids.pids))}) are analysed together as one rank; "
            "profile or export one process per file for per-rank figures"
        )
    if len(devices) > 1:
        notes.append(
            f"{len(devices)} devices in one file: their streams are numbered "
            f"device × {STREAM_PER_DEVICE:,} + stream, and the breakdown spans all of them"
        )
    metadata: dict[str, Any] = {"deviceProperties": _device_properties(schema, devices)}
    rank_meta, rank_note = _rank(schema)
    if rank_meta:
        metadata["distributedInfo"] = rank_meta
        notes.append(rank_note)
    source = SourceInfo("nsight-sqlite", release, notes=list(notes))
    return builder.build(
        path, metadata, source, [f"Nsight Systems export: {release or 'release unknown'}", *notes]
    )


def _release(schema: Schema) -> str:
    """'NVIDIA Nsight Systems 2022.2.1.31 (export schema 2.9.1)', from whichever metadata table exists."""
    for table in ("EXPORT_META_DATA", "META_DATA_EXPORT"):
        if {"name", "value"} <= schema.columns(table):
            meta = dict(schema.db.execute(f'SELECT name, value FROM "{table}"').fetchall())
            product = meta.get("EXPORT_PRODUCT_NAME", "Nsight Systems")
            version = meta.get("EXPORT_PRODUCT_VERSION", "")
            schema_version = meta.get("EXPORT_SCHEMA_VERSION", "")
            text = f"{product} {version}".strip()
            return text + (f" (export schema {schema_version})" if schema_version else "")
    return ""


class _Ids:
    """Process numbering: correlation ids are per process, so several processes get disjoint ranges."""

    def __init__(self) -> None:
        self.pids: dict[int, int] = {}  # pid -> index

    def offset(self, pids: np.ndarray) -> np.ndarray:
        """Per row, index(pid) << 32 (0 for the first process seen)."""
        out = np.zeros(pids.shape, dtype=np.float64)
        for pid in np.unique(pids).tolist():
            index = self.pids.setdefault(int(pid), len(self.pids))
            out[pids == pid] = float(index << 32)
        return out


def _pid_of(global_id: np.ndarray) -> np.ndarray:
    """The OS pid in a globalPid / globalTid (bits 24-47, as the Nsight schema documents)."""
    return (global_id.astype(np.int64) >> 24) & 0xFFFFFF


def _tid_label(global_tid: int) -> str:
    return f"pid {(int(global_tid) >> 24) & 0xFFFFFF} tid {int(global_tid) & 0xFFFFFF}"


def _select(schema: Schema, table: str, wanted: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Rows of the wanted columns (NULL for the ones this release lacks)."""
    have = schema.columns(table)
    cols = ", ".join(f'"{c}"' if c in have else "NULL" for c in wanted)
    return schema.db.execute(f'SELECT {cols} FROM "{table}"').fetchall()


def _device_ops(schema: Schema, builder: RowBuilder, ids: _Ids, notes: list[str]) -> list[int]:
    """Kernels, copies and memsets; returns the devices seen."""
    seen: set[int] = set()
    common = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid")
    kinds = (
        ("CUPTI_ACTIVITY_KIND_KERNEL", "kernel", ("demangledName", "shortName", "name")),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy", ("copyKind", "srcKind", "dstKind", "bytes")),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset", ("memKind", "bytes")),
    )
    rows_by_kind = {
        cat: _select(schema, table, common + extra) for table, cat, extra in kinds if table in schema.tables
    }
    all_devices = {int(r[2] or 0) for rows in rows_by_kind.values() for r in rows}
    several = len(all_devices) > 1
    for cat, rows in rows_by_kind.items():
        if not rows:
            continue
        start, end, device, stream, corr, gpid = (
            np.array([r[i] for r in rows], dtype=np.float64) for i in range(6)
        )
        device = np.nan_to_num(device).astype(np.int64)
        seen |= set(device.tolist())
        stream_id = np.nan_to_num(stream).astype(np.int64) + (device * STREAM_PER_DEVICE if several else 0)
        correlation = np.where(np.isnan(corr), -1.0, corr + ids.offset(_pid_of(np.nan_to_num(gpid))))
        names, nbytes = _names(schema, cat, rows)
        labels = [f"device {d} stream {s:g}" for d, s in zip(device.tolist(), stream.tolist(), strict=True)]
        builder.add(
            cat, names, labels, start / 1000.0, (end - start) / 1000.0, stream_id, correlation, nbytes
        )
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in schema.tables:
        notes.append("no CUPTI_ACTIVITY_KIND_KERNEL table: the export holds no kernels")
    return sorted(seen)


def _names(schema: Schema, cat: str, rows: list[tuple[Any, ...]]) -> tuple[list[str], np.ndarray]:
    """Row names in Kineto's vocabulary, and bytes (NaN for kernels)."""
    if cat == "kernel":
        return [
            schema.text(r[6] if r[6] is not None else (r[7] if r[7] is not None else r[8])) for r in rows
        ], (np.full(len(rows), np.nan))
    kind = schema.enum("ENUM_CUDA_MEM_KIND", MEM_KIND)
    if cat == "gpu_memset":
        names = [f"Memset ({kind.get(int(r[6]) if r[6] is not None else 2, 'Unknown')})" for r in rows]
        return names, np.array([r[7] if r[7] is not None else np.nan for r in rows], dtype=np.float64)
    oper = schema.enum("ENUM_CUDA_MEMCPY_OPER", MEMCPY_OPER)
    names = []
    for r in rows:
        direction = oper.get(int(r[6]) if r[6] is not None else 0, "Unknown")
        if r[7] is None or r[8] is None:
            names.append(f"Memcpy {direction}")
        else:
            names.append(
                f"Memcpy {direction} ({kind.get(int(r[7]), 'Unknown')} -> {kind.get(int(r[8]), 'Unknown')})"
            )
    return names, np.array([r[9] if r[9] is not None else np.nan for r in rows], dtype=np.float64)


def _runtime(schema: Schema, builder: RowBuilder, ids: _Ids, notes: list[str]) -> None:
    """CUDA runtime / driver calls: one row per (thread, correlation id, call)."""
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in schema.tables:
        notes.append(
            "no CUPTI_ACTIVITY_KIND_RUNTIME table: launches and synchronizing calls are not in the export"
        )
        return
    best: dict[tuple[int, int, str], tuple[int, int]] = {}
    for start, end, gtid, corr, name_id, name in _select(
        schema, table, ("start", "end", "globalTid", "correlationId", "nameId", "name")
    ):
        base = _VERSION_SUFFIX.sub("", schema.text(name_id if name_id is not None else name))
        key = (int(gtid or 0), int(corr if corr is not None else -1), base)
        if start is None or end is None:
            continue
        kept = best.get(key)
        if kept is None or end - start > kept[1] - kept[0] or corr is None:
            best[key] = (int(start), int(end))
    if not best:
        return
    keys = list(best)
    start = np.array([best[k][0] for k in keys], dtype=np.float64)
    end = np.array([best[k][1] for k in keys], dtype=np.float64)
    gtid = np.array([k[0] for k in keys], dtype=np.int64)
    corr = np.array([k[1] for k in keys], dtype=np.float64)
    correlation = np.where(corr < 0, -1.0, corr + ids.offset(_pid_of(gtid)))
    names = [k[2] for k in keys]
    driver = np.array([not n.startswith("cuda") for n in names])
    for cat, mask in (("cuda_runtime", ~driver), ("cuda_driver", driver)):
        sel = np.flatnonzero(mask)
        builder.add(
            cat, [names[i] for i in sel], [_tid_label(gtid[i]) for i in sel],
            start[sel] / 1000.0, (end[sel] - start[sel]) / 1000.0, -1, correlation[sel],
        )  # fmt: skip


def _device_properties(schema: Schema, devices: list[int]) -> list[dict[str, Any]]:
    """Kineto-style deviceProperties of the devices with activity (all listed GPUs when none ran)."""
    table = "TARGET_INFO_GPU" if "TARGET_INFO_GPU" in schema.tables else "TARGET_INFO_CUDA_DEVICE"
    wanted = ("id", "cuDevice", "name", "totalMemory", "computeMajor", "computeMinor", "busLocation")
    if not schema.columns(table):
        return []
    out = []
    for gid, cu_device, name, memory, major, minor, bus in _select(schema, table, wanted):
        device = cu_device if cu_device is not None else gid
        if devices and device not in devices and gid not in devices:
            continue
        out.append(
            {
                "id": device,
                "name": name,
                "totalGlobalMem": memory,
                "computeMajor": major,
                "computeMinor": minor,
            }
            | ({"busLocation": bus} if bus else {})
        )
    return out


def _rank(schema: Schema) -> tuple[dict[str, Any], str]:
    """distributedInfo from the environment Nsight recorded (RANK / PMI_RANK / ...), if any."""
    if not {"name", "value"} <= schema.columns("TARGET_INFO_SYSTEM_ENV"):
        return {}, ""
    env: dict[str, str] = {}
    for name, value in schema.db.execute('SELECT name, value FROM "TARGET_INFO_SYSTEM_ENV"').fetchall():
        text = str(value or "")
        if "Environment" in str(name) and "=" in text:  # DeviceEnvironment: the environment, NUL-separated
            env |= dict(item.split("=", 1) for item in text.split("\x00") if "=" in item)
    rank_key = next((k for k in _RANK_ENV if k in env), None)
    if rank_key is None:
        return {}, ""
    world_key = next((k for k in _WORLD_ENV if k in env), None)
    info: dict[str, Any] = {"rank": env[rank_key]}
    if world_key:
        info["world_size"] = env[world_key]
    where = f"{rank_key}={env[rank_key]}" + (f", {world_key}={env[world_key]}" if world_key else "")
    return info, f"rank from the environment Nsight recorded ({where})"
