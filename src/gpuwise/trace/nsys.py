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
from collections.abc import Callable, Iterator
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


def _numbers(schema: Schema, table: str, wanted: tuple[str, ...]) -> np.ndarray:
    """The wanted numeric columns as one float64 array (rows × columns), in row order. A NULL, or a column
    this release lacks, is -1 (no id, size or kind is negative); rows without start or end are left out."""
    have = schema.columns(table)
    cols = ", ".join(f'IFNULL("{c}", -1)' if c in have else "-1" for c in wanted)
    rows = schema.db.execute(
        f'SELECT {cols} FROM "{table}" WHERE "start" IS NOT NULL AND "end" IS NOT NULL ORDER BY rowid'
    ).fetchall()
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(wanted))


def _texts(schema: Schema, table: str, wanted: tuple[str, ...]) -> list[str]:
    """Per row (the order of `_numbers`), the first non-NULL of the wanted name columns, as text."""
    have = [f'"{c}"' for c in wanted if c in schema.columns(table)]
    expr = f"COALESCE({', '.join(have)}, NULL)" if have else "NULL"
    rows = schema.db.execute(
        f'SELECT {expr} FROM "{table}" WHERE "start" IS NOT NULL AND "end" IS NOT NULL ORDER BY rowid'
    ).fetchall()
    values = [r[0] for r in rows]
    distinct = {v: schema.text(v) for v in set(values)}  # string ids repeat: each resolved once
    return [distinct[v] for v in values]


def _labels(values: np.ndarray, label: Callable[[Any], str]) -> list[str]:
    """label(value) per row, computed once per distinct value."""
    uniq, inverse = np.unique(values, return_inverse=True)
    texts = [label(v) for v in uniq.tolist()]
    return [texts[i] for i in inverse.ravel().tolist()]


def _stream_label(value: float) -> str:
    return f"device {int(value) // STREAM_PER_DEVICE} stream {int(value) % STREAM_PER_DEVICE}"


def _device_ops(schema: Schema, builder: RowBuilder, ids: _Ids, notes: list[str]) -> list[int]:
    """Kernels, copies and memsets; returns the devices seen."""
    common = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes")
    kinds = (
        ("CUPTI_ACTIVITY_KIND_KERNEL", "kernel", ()),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy", ("copyKind", "srcKind", "dstKind")),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset", ("memKind",)),
    )
    present = [(t, cat, extra) for t, cat, extra in kinds if t in schema.tables]
    data = {cat: _numbers(schema, t, common + extra) for t, cat, extra in present}
    devices = sorted({int(d) for cols in data.values() for d in np.unique(cols[:, 2]).tolist()})
    several = len(devices) > 1
    for table, cat, _ in present:
        cols = data[cat]
        if not len(cols):
            continue
        start, end, device, stream, corr, gpid, size = (cols[:, i] for i in range(7))
        stream_id = stream.astype(np.int64) + (device.astype(np.int64) * STREAM_PER_DEVICE if several else 0)
        correlation = np.where(corr < 0, -1.0, corr + ids.offset(_pid_of(np.maximum(gpid, 0))))
        if cat == "kernel":
            names = _texts(schema, table, ("demangledName", "shortName", "name"))
        else:
            names = _copy_names(schema, cat, cols[:, 7:])
        labels = _labels(device * STREAM_PER_DEVICE + stream, _stream_label)
        nbytes = np.where(size < 0, np.nan, size) if cat != "kernel" else np.nan
        builder.add(
            cat, names, labels, start / 1000.0, (end - start) / 1000.0, stream_id, correlation, nbytes
        )
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in schema.tables:
        notes.append("no CUPTI_ACTIVITY_KIND_KERNEL table: the export holds no kernels")
    return devices


def _copy_names(schema: Schema, cat: str, kinds: np.ndarray) -> list[str]:
    """Copy / memset names in Kineto's vocabulary (``Memcpy HtoD (Pageable -> Device)``) from the
    operation and memory-kind columns (-1 = not recorded)."""
    mem = schema.enum("ENUM_CUDA_MEM_KIND", MEM_KIND)
    if cat == "gpu_memset":
        return _labels(kinds[:, 0], lambda k: f"Memset ({mem.get(int(k) if k >= 0 else 2, 'Unknown')})")
    oper = schema.enum("ENUM_CUDA_MEMCPY_OPER", MEMCPY_OPER)

    def name(code: int) -> str:  # code = (op + 1) * 10,000 + (src + 1) * 100 + (dst + 1)
        op, src, dst = code // 10_000 - 1, code // 100 % 100 - 1, code % 100 - 1
        direction = oper.get(op, "Unknown")
        if src < 0 or dst < 0:
            return f"Memcpy {direction}"
        return f"Memcpy {direction} ({mem.get(src, 'Unknown')} -> {mem.get(dst, 'Unknown')})"

    k = np.clip(kinds.astype(np.int64), -1, 98) + 1
    return _labels(k[:, 0] * 10_000 + k[:, 1] * 100 + k[:, 2], name)


def _runtime(schema: Schema, builder: RowBuilder, ids: _Ids, notes: list[str]) -> None:
    """CUDA runtime / driver calls: one row per (thread, correlation id, call), the longest kept."""
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in schema.tables:
        notes.append(
            "no CUPTI_ACTIVITY_KIND_RUNTIME table: launches and synchronizing calls are not in the export"
        )
        return
    cols = _numbers(schema, table, ("start", "end", "globalTid", "correlationId"))
    if not len(cols):
        return
    raw = _texts(schema, table, ("nameId", "name"))
    base_of = {n: _VERSION_SUFFIX.sub("", n) for n in set(raw)}
    code_of = {n: i for i, n in enumerate(sorted(set(base_of.values())))}
    names = [base_of[n] for n in raw]
    codes = np.array([code_of[n] for n in names], dtype=np.float64)
    start, end, gtid, corr = (cols[:, i] for i in range(4))
    # 2022 releases store some calls twice under one correlation id (cudaMemcpy, cudaMemcpy_v3020): keep one
    order = np.lexsort((start - end, codes, corr, gtid))
    key = np.stack([gtid[order], corr[order], codes[order]], axis=1)
    first = np.ones(len(order), dtype=bool)
    first[1:] = (key[1:] != key[:-1]).any(axis=1) | (corr[order][1:] < 0)
    keep = np.sort(order[first])
    correlation = np.where(corr[keep] < 0, -1.0, corr[keep] + ids.offset(_pid_of(gtid[keep])))
    kept_names = [names[i] for i in keep.tolist()]
    tids = _labels(gtid[keep], _tid_label)
    driver = np.array([not n.startswith("cuda") for n in kept_names], dtype=bool)
    for cat, mask in (("cuda_runtime", ~driver), ("cuda_driver", driver)):
        sel = np.flatnonzero(mask)
        rows = keep[sel]
        builder.add(
            cat, [kept_names[i] for i in sel.tolist()], [tids[i] for i in sel.tolist()],
            start[rows] / 1000.0, (end[rows] - start[rows]) / 1000.0, -1, correlation[sel],
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
