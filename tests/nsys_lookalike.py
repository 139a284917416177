"""Write Nsight Systems SQLite exports to the documented schema, for cases no public export shows.

The tables and columns are those of the Nsight Systems "SQLite Export Schema Reference" (the subset
gpuwise reads): StringIds, CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET / _RUNTIME, NVTX_EVENTS,
TARGET_INFO_GPU, the export metadata table and, as newer releases write them, ENUM_CUDA_MEMCPY_OPER and
ENUM_CUDA_MEM_KIND. Times are ns. Test support: a look-alike, not a recording.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NsysExport", "global_pid", "global_tid"]

# The schema's documented enum values (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND).
MEMCPY_OPER = [(0, "CUDA_MEMCPY_OPER_UNKNOWN", "Unknown"), (1, "CUDA_MEMCPY_OPER_HTOD", "Host-to-Device")]
MEMCPY_OPER += [
    (2, "CUDA_MEMCPY_OPER_DTOH", "Device-to-Host"),
    (8, "CUDA_MEMCPY_OPER_DTOD", "Device-to-Device"),
]
MEM_KIND = [
    (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
    (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
]
MEM_KIND += [
    (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
    (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
]


def global_pid(pid: int) -> int:
    """The schema's serialized process id (pid in bits 24-47)."""
    return pid << 24


def global_tid(pid: int, tid: int) -> int:
    """The schema's serialized thread id (pid in bits 24-47, tid in bits 0-23)."""
    return (pid << 24) | tid


@dataclass
class NsysExport:
    """Rows of one export; ``write`` makes the SQLite file."""

    release: str = "2024.5.1.113"
    with_enums: bool = True  # newer releases write the ENUM_* tables
    meta_table: str = "META_DATA_EXPORT"
    strings: dict[str, int] = field(default_factory=dict)
    kernels: list[tuple] = field(default_factory=list)
    memcpys: list[tuple] = field(default_factory=list)
    memsets: list[tuple] = field(default_factory=list)
    runtime: list[tuple] = field(default_factory=list)
    nvtx: list[tuple] = field(default_factory=list)
    gpus: list[tuple] = field(default_factory=list)
    env: str = ""

    def sid(self, text: str) -> int:
        """The StringIds id of a text (added on first use)."""
        return self.strings.setdefault(text, len(self.strings) + 1)

    def kernel(self, start: int, dur: int, name: str, corr: int, *, device=0, stream=7, pid=100) -> None:
        self.kernels.append(
            (start, start + dur, device, 1, stream, corr, global_pid(pid), self.sid(name), self.sid(name))
        )

    def memcpy(
        self,
        start: int,
        dur: int,
        kind: int,
        src: int,
        dst: int,
        nbytes: int,
        corr: int,
        *,
        device=0,
        stream=7,
        pid=100,
    ) -> None:
        self.memcpys.append(
            (start, start + dur, device, 1, stream, corr, global_pid(pid), nbytes, kind, src, dst)
        )

    def memset(self, start: int, dur: int, nbytes: int, corr: int, *, device=0, stream=7, pid=100) -> None:
        self.memsets.append((start, start + dur, device, 1, stream, corr, global_pid(pid), 0, nbytes, 2))

    def call(self, start: int, dur: int, name: str, corr: int, *, pid=100, tid=100) -> None:
        self.runtime.append((start, start + dur, global_tid(pid, tid), corr, self.sid(name), 0))

    def range(self, start: int, dur: int | None, text: str, *, pid=100, tid=100) -> None:
        """An NVTX push/pop range (eventType 59); ``dur`` None makes a mark (eventType 34)."""
        end = None if dur is None else start + dur
        self.nvtx.append((start, end, 59 if dur is not None else 34, text, global_tid(pid, tid), 0))

    def gpu(self, device: int, name: str, memory: int, major: int, minor: int) -> None:
        self.gpus.append((device, device, name, memory, major, minor, f"0000:{device:02x}:00.0"))

    def write(self, path: Path) -> Path:
        db = sqlite3.connect(path)
        self._tables(db)
        db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()])
        db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?)", self.kernels)
        db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?,?)", self.memcpys)
        db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?,?)", self.memsets)
        db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?)", self.runtime)
        db.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?)", self.nvtx)
        db.executemany("INSERT INTO TARGET_INFO_GPU VALUES (?,?,?,?,?,?,?)", self.gpus)
        meta = [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", self.release)]
        db.executemany(f"INSERT INTO {self.meta_table} VALUES (?, ?)", meta)
        if self.env:
            db.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES ('DeviceEnvironment', ?)", (self.env,))
        if self.with_enums:
            db.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?,?,?)", MEMCPY_OPER)
            db.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?,?,?)", MEM_KIND)
        db.commit()
        db.close()
        return path

    def _tables(self, db: sqlite3.Connection) -> None:
        ddl = [
            "StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)",
            "CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, contextId INT, streamId INT,"
            " correlationId INT, globalPid INT, demangledName INT, shortName INT)",
            "CUPTI_ACTIVITY_KIND_MEMCPY (start INT, end INT, deviceId INT, contextId INT, streamId INT,"
            " correlationId INT, globalPid INT, bytes INT, copyKind INT, srcKind INT, dstKind INT)",
            "CUPTI_ACTIVITY_KIND_MEMSET (start INT, end INT, deviceId INT, contextId INT, streamId INT,"
            " correlationId INT, globalPid INT, value INT, bytes INT, memKind INT)",
            "CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT,"
            " returnValue INT)",
            "NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, globalTid INT, domainId INT)",
            "TARGET_INFO_GPU (id INT, cuDevice INT, name TEXT, totalMemory INT, computeMajor INT,"
            " computeMinor INT, busLocation TEXT)",
            f"{self.meta_table} (name TEXT, value TEXT)",
            "TARGET_INFO_SYSTEM_ENV (name TEXT, value TEXT)",
        ]
        if self.with_enums:
            ddl += [
                "ENUM_CUDA_MEMCPY_OPER (id INT, name TEXT, label TEXT)",
                "ENUM_CUDA_MEM_KIND (id INT, name TEXT, label TEXT)",
            ]
        for table in ddl:
            db.execute(f"CREATE TABLE {table}")
