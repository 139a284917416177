"""Memory copies: direction, bytes, time, and whether host memory was pageable or pinned.

CUPTI names each copy ``Memcpy HtoD (Pageable -> Device)``: the direction, then the kinds of
source and destination memory. A pageable host buffer forces a staging copy through a pinned
bounce buffer: it runs at a fraction of PCIe speed and cannot overlap compute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuwise.trace.breakdown import union_length
from gpuwise.trace.hta_selection import unique_rows
from gpuwise.trace.kernels import MEMCPY_CATS
from gpuwise.trace.table import EventTable, distinct

__all__ = ["CopyStats", "copy_stats"]

_NAME_RE = re.compile(r"^Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?")


@dataclass
class CopyStats:
    """Memory copies of one rank by direction (count, bytes, time in µs, pageable count and bytes),
    host->device copy time as % of the device span, and the share of H2D (and D2H) bytes from
    pageable memory."""

    directions: dict[
        str, dict[str, float]
    ]  # HtoD/DtoH/DtoD/... -> count, bytes, time_us, pageable_count, pageable_bytes
    h2d_copy_pct: float | None  # host->device copy time, share of the device span
    pageable_copy_pct: (
        float | None
    )  # share of host->device bytes (copies, if sizes are missing) from pageable memory
    pageable_d2h_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: counts and bytes as integers, times and shares rounded."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "directions": {
                k: {
                    kk: (int(vv) if kk.endswith(("count", "bytes")) else round(vv, 3)) for kk, vv in v.items()
                }
                for k, v in self.directions.items()
            },
            "h2d_copy_pct": r(self.h2d_copy_pct),
            "pageable_copy_pct": r(self.pageable_copy_pct),
            "pageable_d2h_pct": r(self.pageable_d2h_pct),
        }


def copy_stats(t: EventTable, rows: np.ndarray, span_us: float | None) -> CopyStats:
    """Copies among `rows` (event indices of the analysis window), by direction and memory kind
    parsed from CUPTI's name; `span_us` is the device span the H2D share is taken of."""
    rows = unique_rows(rows)
    rows = rows[t.cat_mask(*MEMCPY_CATS)[rows]]
    parsed: dict[int, tuple[str, bool]] = {}
    for code in distinct(t.name[rows]).tolist():
        match = _NAME_RE.match(t.name_of(code))
        direction = match.group(1) if match else "unknown"
        pageable = bool(match and "Pageable" in (match.group(2) or "", match.group(3) or ""))
        parsed[code] = (direction, pageable)
    directions: dict[str, dict[str, float]] = {}
    h2d_rows = []
    for code, (direction, pageable) in parsed.items():
        sel = rows[t.name[rows] == code]
        nbytes = np.nan_to_num(t.nbytes[sel], nan=0.0)
        entry = directions.setdefault(
            direction, {"count": 0, "bytes": 0, "time_us": 0.0, "pageable_count": 0, "pageable_bytes": 0}
        )
        entry["count"] += sel.size
        entry["bytes"] += float(nbytes.sum())
        entry["time_us"] += float(t.dur[sel].sum())
        if pageable:
            entry["pageable_count"] += sel.size
            entry["pageable_bytes"] += float(nbytes.sum())
        if direction == "HtoD":
            h2d_rows.append(sel)
    h2d = np.concatenate(h2d_rows) if h2d_rows else np.zeros(0, dtype=np.int64)
    h2d_pct = 100.0 * union_length(t.ts[h2d], t.ts[h2d] + t.dur[h2d]) / span_us if span_us else None
    return CopyStats(
        directions,
        h2d_pct if h2d.size or span_us else None,
        _pageable_share(directions.get("HtoD")),
        _pageable_share(directions.get("DtoH")),
    )


def _pageable_share(entry: dict[str, float] | None) -> float | None:
    if not entry or not entry["count"]:
        return None
    if entry["bytes"] > 0:
        return 100.0 * entry["pageable_bytes"] / entry["bytes"]
    return 100.0 * entry["pageable_count"] / entry["count"]
