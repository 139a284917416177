"""EventTable: one trace held as columns (numpy arrays + interned strings), not as event objects.

A 1 GB trace has millions of events; as Python dicts that is 5-10x the file size in RAM. Here each
event costs ~70 bytes of arrays, and each distinct name/category is stored once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EventTable", "Interner", "MemoryEvents", "distinct", "percentile"]


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique without its first-call import of numpy.ma, ~25 ms)."""
    if values.size < 2:
        return np.asarray(values).copy()
    ordered = np.sort(values, kind="stable")
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def percentile(values: np.ndarray, q: float) -> float:
    """``float(np.percentile(values, q))`` (linear method), bit for bit, for a non-empty 1-D array:
    NumPy's arithmetic on the two order statistics it interpolates, without the np.unique call
    through which np.percentile imports numpy.ma on first use (~25 ms of start-up)."""
    n = values.size
    virtual = (n - 1) * (q / 100)  # NumPy: (n - 1) * true_divide(q, 100)
    below = int(virtual // 1)
    if virtual >= n - 1:
        below = above = n - 1
    else:
        above = below + 1
    ordered = np.partition(values, sorted({below, above, n - 1}))
    if ordered.dtype.kind == "f" and np.isnan(ordered[n - 1]):
        return float("nan")  # NaN sorts last; NumPy returns NaN for a slice that holds one
    a, b = float(ordered[below]), float(ordered[above])
    t = virtual - (below if above > below else -1)  # NumPy's gamma: index - floor (-1 past the end)
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t  # NumPy's _lerp


class Interner:
    """Map hashable values (names, categories, pids) to dense int ids, keeping the values once."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []

    def encode(self, rows: list[Any], get: Callable[[Any], Any]) -> np.ndarray:
        """Ids of ``get(row)`` for every row (new values get the next ids)."""
        ids = self.ids
        try:
            return np.fromiter(map(ids.__getitem__, map(get, rows)), dtype=np.int32, count=len(rows))
        except (KeyError, TypeError):
            pass
        items = list(map(get, rows))
        try:
            first_seen = dict.fromkeys(items)
        except TypeError:  # an unhashable value (a list where a string belongs): keep its text
            items = [v if isinstance(v, (str, int, float, type(None))) else repr(v) for v in items]
            first_seen = dict.fromkeys(items)
        for value in first_seen:
            if value not in ids:
                ids[value] = len(self.values)
                self.values.append(value)
        return np.fromiter(map(ids.__getitem__, items), dtype=np.int32, count=len(items))

    def code(self, value: Any) -> int:
        """The id of ``value``, or -1 when the trace never contained it."""
        return self.ids.get(value, -1)


@dataclass
class MemoryEvents:
    """The ``[memory]`` instant events (allocator activity recorded with profile_memory=True)."""

    ts: np.ndarray  # µs
    bytes: np.ndarray  # signed: allocation > 0, free < 0
    total_allocated: np.ndarray  # NaN when the trace predates these fields
    total_reserved: np.ndarray
    device_type: np.ndarray  # 0 CPU, 1 CUDA (c10::DeviceType); NaN unknown
    device_id: np.ndarray


@dataclass
class EventTable:
    """The complete (ph "X") events of one trace file, column by column, in file order.

    Flow, metadata and counter events are counted (``phase_counts``) but not stored: no analysis
    reads them. ``[memory]`` instants go to ``memory``.
    """

    path: Path
    json_bytes: int  # size of the JSON text (decompressed)
    file_bytes: int  # size on disk
    metadata: dict[str, Any]  # top-level keys other than traceEvents (distributedInfo, deviceProperties, ...)
    events_total: int  # every entry of traceEvents
    phase_counts: dict[Any, int]  # ph -> number of events
    first_event_is_row0: bool  # traceEvents[0] is a complete event (row 0): HTA's index-0 join can hit it
    cat: np.ndarray  # int32 ids into cats
    name: np.ndarray  # int32 ids into names
    tid: np.ndarray  # int32 ids into tids
    ts: np.ndarray  # float64 µs as written (NaN = missing)
    dur: np.ndarray  # float64 µs (NaN = missing)
    stream: np.ndarray  # int64, args.stream as HTA normalizes it (-1 = none / not a number)
    correlation: np.ndarray  # float64, args.correlation (-1 = none)
    nbytes: np.ndarray  # float64, args.bytes of copies and memsets (NaN = none)
    cats: list[Any]
    names: list[Any]
    tids: list[Any]
    ts_has_float: (
        bool  # any ts (of any event) written as a JSON float, or missing: HTA then rounds to whole µs
    )
    memory: MemoryEvents
    warnings: list[str] = field(default_factory=list)

    @property
    def num_events(self) -> int:
        """Rows: complete events."""
        return int(self.ts.shape[0])

    def cat_mask(self, *names: str) -> np.ndarray:
        """Per event: is its category one of `names`?"""
        lookup = np.zeros(len(self.cats) + 1, dtype=bool)
        lookup[[i for i, v in enumerate(self.cats) if v in names]] = True
        return lookup[self.cat]

    def name_mask(self, codes: np.ndarray) -> np.ndarray:
        """Rows whose name code is in ``codes`` (a lookup table: one pass, however many codes)."""
        lookup = np.zeros(len(self.names) + 1, dtype=bool)
        lookup[np.asarray(codes, dtype=np.int64)] = True
        return lookup[self.name]

    def name_codes(self, predicate) -> np.ndarray:
        """Codes (int32) of the interned names for which `predicate(name)` holds: test each distinct
        name once, then select rows with `name_mask`."""
        return np.array(
            [i for i, v in enumerate(self.names) if isinstance(v, str) and predicate(v)], dtype=np.int32
        )

    def rows_named(self, rows: np.ndarray, predicate: Callable[[str], object]) -> np.ndarray:
        """The ``rows`` whose name satisfies ``predicate``, in their order; only the distinct names among
        them are tested, once each (a rank's runtime calls use a handful of its hundreds of names)."""
        codes = self.name[rows]
        lookup = np.zeros(len(self.names) + 1, dtype=bool)
        for code in distinct(codes).tolist():
            value = self.names[code] if code >= 0 else None
            lookup[code] = isinstance(value, str) and bool(predicate(value))
        return rows[lookup[codes]]

    def name_of(self, code: int) -> str:
        """The name string of a code ('' for -1, no name)."""
        value = self.names[code] if code >= 0 else ""
        return value if isinstance(value, str) else str(value)
