"""Build the analyzer's `EventTable` from rows that are not Kineto JSON (Nsight SQLite, XLA profiles).

Every reader translates its source into the same vocabulary the Kineto path produces, so the
breakdown, kernels, steps, copies and findings come out of the same code and the rules never know
the source:

- device work: category ``kernel``, ``gpu_memcpy`` (named ``Memcpy HtoD (Pageable -> Device)`` as
  CUPTI names copies in Kineto) or ``gpu_memset``, on a stream >= 0;
- host work: ``cuda_runtime`` / ``cuda_driver`` calls, ``user_annotation`` ranges and ``cpu_op``
  events on stream -1;
- steps: ``ProfilerStep#N`` host rows; input-pipeline waits: a name containing
  ``DataLoader ... __next__`` (what `steps.step_stats` reads as time waiting for data).

A device row's correlation id links it to the host call that launched it; a reader sets -1 where the
source has no such call, so HTA's last-step window (which keeps device rows by their launch) never
drops device work it cannot place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuwise.trace.table import EventTable, Interner, MemoryEvents

__all__ = ["SOURCE_KEY", "RowBuilder", "SourceInfo"]

# The key of `EventTable.metadata` under which a reader describes its source (`SourceInfo.to_dict`).
SOURCE_KEY = "gpuwise_source"


@dataclass
class SourceInfo:
    """What a non-Kineto reader says about the file: format, producer, release, device kind."""

    format: str  # 'nsight-sqlite' | 'xplane' | 'xla-trace-json'
    producer: str = ""  # e.g. 'NVIDIA Nsight Systems 2022.2.1.31', 'JAX 0.10.2'
    device_kind: str = ""  # '' = decided by the analysis (cuda when device rows exist), or 'tpu'
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form, stored in the table's metadata."""
        return {
            "format": self.format,
            "producer": self.producer,
            "device_kind": self.device_kind,
            "notes": list(self.notes),
        }


class RowBuilder:
    """Collects rows column by column (numpy arrays per part) and builds one `EventTable`.

    Times are µs (float64). Names, categories and thread labels are interned once each.
    """

    _FLOAT = ("ts", "dur", "correlation", "nbytes")

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {
            k: [] for k in ("cat", "name", "tid", "ts", "dur", "stream", "correlation", "nbytes")
        }
        self.cats, self.names, self.tids = Interner(), Interner(), Interner()
        self.rows = 0

    def add(
        self,
        cat: str,
        names: list[str],
        tids: list[Any],
        ts_us: np.ndarray,
        dur_us: np.ndarray,
        stream: np.ndarray | int = -1,
        correlation: np.ndarray | int = -1,
        nbytes: np.ndarray | float = np.nan,
    ) -> None:
        """Append ``len(names)`` rows of one category; scalars are broadcast to every row."""
        n = len(names)
        if n == 0:
            return
        p = self.parts
        p["cat"].append(self.cats.encode([cat] * n, _same))
        p["name"].append(self.names.encode(names, _same))
        p["tid"].append(self.tids.encode(tids, _same))
        p["ts"].append(np.asarray(ts_us, dtype=np.float64).reshape(n))
        p["dur"].append(np.asarray(dur_us, dtype=np.float64).reshape(n))
        p["stream"].append(np.broadcast_to(np.asarray(stream, dtype=np.int64), (n,)).copy())
        p["correlation"].append(np.broadcast_to(np.asarray(correlation, dtype=np.float64), (n,)).copy())
        p["nbytes"].append(np.broadcast_to(np.asarray(nbytes, dtype=np.float64), (n,)).copy())
        self.rows += n

    def build(
        self,
        path: Path,
        metadata: dict[str, Any],
        source: SourceInfo,
        warnings: list[str],
        input_bytes: int | None = None,
    ) -> EventTable:
        """The table; ``input_bytes`` is what was read (the file size when None)."""
        size = path.stat().st_size
        cols = {
            k: (
                np.concatenate(v)
                if v
                else np.zeros(
                    0, dtype=np.float64 if k in self._FLOAT else (np.int64 if k == "stream" else np.int32)
                )
            )
            for k, v in self.parts.items()
        }
        unlinked = _unlink_orphans(cols["stream"], cols["correlation"])
        if unlinked:
            warnings = [*warnings, f"{unlinked:,} device operations have no launching host call in the file"]
        empty = np.zeros(0, dtype=np.float64)
        return EventTable(
            path=path,
            json_bytes=input_bytes if input_bytes is not None else size,
            file_bytes=size,
            metadata={**metadata, SOURCE_KEY: source.to_dict()},
            events_total=self.rows,
            phase_counts={"X": self.rows},
            first_event_is_row0=False,  # no HTA index-0 join: a link to row 0 is a real partner or none
            cat=cols["cat"],
            name=cols["name"],
            tid=cols["tid"],
            ts=cols["ts"],
            dur=cols["dur"],
            stream=cols["stream"],
            correlation=cols["correlation"],
            nbytes=cols["nbytes"],
            cats=self.cats.values,
            names=self.names.values,
            tids=self.tids.values,
            ts_has_float=False,  # sub-µs times are exact here: no HTA whole-µs rounding
            memory=MemoryEvents(empty, empty, empty, empty, empty, empty),
            warnings=warnings,
        )


def _unlink_orphans(stream: np.ndarray, correlation: np.ndarray) -> int:
    """Set -1 on device rows whose correlation id no host row carries; return how many.

    HTA's last-step window keeps a device row only through its launch: a row whose launch is not in
    the file would be dropped with it, so it is kept as unlinked instead (launch statistics skip it).
    """
    device = (stream >= 0) & (correlation >= 0)
    if not device.any():
        return 0
    host_ids = correlation[(stream < 0) & (correlation >= 0)]
    orphan = device & ~np.isin(correlation, host_ids)
    correlation[orphan] = -1
    return int(orphan.sum())


def _same(value: Any) -> Any:
    return value
