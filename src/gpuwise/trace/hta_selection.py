"""The events HTA (Holistic Trace Analysis 0.5) analyzes, selected exactly as it selects them.

Agreement with HTA is a contract (issue: within 0.5 percentage points), so its parse and filter
rules are reproduced here, each with where it comes from in HTA's source:
- rows: events with a ``dur`` and a ``cat``, minus ``cat == "Trace"`` (trace_parser._compress_df);
- timestamps: when any ``ts`` is a JSON float, ``ts`` is rounded up and ``ts + dur`` down to
  whole µs (trace_parser.round_down_time_stamps);
- ``stream`` = int(args.stream) or -1; ``correlation`` = args.correlation or -1;
- GPU rows: stream >= 0 and correlation >= 0, plus "Event Sync"/"Context Sync"
  (trace_filter._filter_gpu_kernels_with_cuda_sync); every other row is a "CPU op";
- with more than one distinct ProfilerStep name, the last step is dropped: CPU ops starting at
  or after the last ProfilerStep's start go, and GPU rows are kept once per remaining CPU op
  sharing their correlation id (Trace._filter_irrelevant_gpu_kernels, an inner merge).
Rows are event indices into the `EventTable` (file order), each once; where HTA's merge repeats a
row, its count is kept beside it instead of the copies: a correlation id shared by k launches and k
kernels would otherwise cost k² rows (quadratic memory on traces with repeated ids).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuwise.trace.table import EventTable, distinct

__all__ = ["SYNC_ON_DEVICE", "HtaView", "build_view", "rounded_times", "unique_rows"]

SYNC_ON_DEVICE = ("Event Sync", "Context Sync")


@dataclass
class HtaView:
    """The rows HTA analyzes (event indices into the EventTable, sorted, each once) with
    HTA-rounded times (µs) and the launch<->kernel links for every event; `copies` holds how many
    times HTA's merge repeats each row."""

    rows: np.ndarray  # event indices kept, each once, sorted
    ts: np.ndarray  # per event (all events), HTA-rounded µs
    end: np.ndarray
    is_gpu: np.ndarray  # per event
    index_correlation: np.ndarray  # per event: the linked launch/kernel row, 0 = linked row absent, -1 = none
    dropped_last_step: bool
    last_step_start_us: float | None
    copies: np.ndarray | None = None  # per row: how many times HTA's merge holds it (None: once each)

    def present(self, num_events: int) -> np.ndarray:
        """Per event: is it among the kept rows (at least once)?"""
        mask = np.zeros(num_events, dtype=bool)
        mask[self.rows] = True
        return mask


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """np.unique for the (usually already sorted) row arrays, without hashing."""
    if rows.size < 2:
        return rows
    if not (rows[1:] >= rows[:-1]).all():
        rows = np.sort(rows, kind="stable")
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))]


def rounded_times(t: EventTable) -> tuple[np.ndarray, np.ndarray]:
    """(ts, end) in µs as HTA holds them: whole µs when the trace has sub-µs (float) timestamps."""
    if t.ts_has_float:
        with np.errstate(invalid="ignore"):
            return np.ceil(t.ts), np.floor(t.ts + t.dur)
    return t.ts, t.ts + t.dur


def build_view(t: EventTable) -> HtaView:
    """Select the rows of `t` by HTA's rules (see the module docstring), dropping the last
    ProfilerStep when the trace has more than one."""
    ts, end = rounded_times(t)
    cat_missing = np.array([v is None for v in t.cats], dtype=bool)
    cat_trace = np.array([v == "Trace" for v in t.cats], dtype=bool)
    kept = ~np.isnan(t.dur)
    if len(t.cats):
        kept &= ~cat_missing[t.cat] & ~cat_trace[t.cat]
    kept &= ~(np.isnan(t.ts) | (t.dur < 0))  # HTA would keep these; gpuwise drops them

    sync_names = t.name_codes(lambda s: s in SYNC_ON_DEVICE)
    is_gpu = ((t.stream >= 0) & (t.correlation >= 0)) | t.name_mask(sync_names)
    index_correlation = _index_correlation(t, kept, is_gpu)

    # The symbol table holds every kept name and category; a filter needs two distinct ProfilerStep symbols.
    kept_names = distinct(t.name[kept])
    kept_cats = distinct(t.cat[kept])
    step_symbols = {
        t.names[c] for c in kept_names if isinstance(t.names[c], str) and "ProfilerStep" in t.names[c]
    }
    step_symbols |= {
        t.cats[c] for c in kept_cats if isinstance(t.cats[c], str) and "ProfilerStep" in t.cats[c]
    }
    cpu = kept & ~is_gpu
    gpu = kept & is_gpu
    step_rows = cpu & t.name_mask(t.name_codes(lambda s: "ProfilerStep" in s))
    if len(step_symbols) <= 1 or not step_rows.any():
        rows = np.flatnonzero(kept)
        return HtaView(rows, ts, end, is_gpu, index_correlation, False, None)

    last_start = float(ts[step_rows].max())
    keep_cpu = cpu & (ts < last_start)
    corr_values, corr_counts = np.unique(t.correlation[keep_cpu], return_counts=True)
    gpu_rows = np.flatnonzero(gpu)
    where = np.searchsorted(corr_values, t.correlation[gpu_rows])
    where = np.minimum(where, max(len(corr_values) - 1, 0))
    matched = (
        (corr_values[where] == t.correlation[gpu_rows]) if len(corr_values) else np.zeros(len(gpu_rows), bool)
    )
    multiplicity = np.where(matched, corr_counts[where] if len(corr_counts) else 0, 0)
    kept_gpu = multiplicity > 0
    rows = np.concatenate([gpu_rows[kept_gpu], np.flatnonzero(keep_cpu)])
    copies = np.concatenate([multiplicity[kept_gpu], np.ones(int(keep_cpu.sum()), dtype=np.int64)])
    order = np.argsort(rows, kind="stable")
    return HtaView(rows[order], ts, end, is_gpu, index_correlation, True, last_start, copies[order])


def _index_correlation(t: EventTable, kept: np.ndarray, is_gpu: np.ndarray) -> np.ndarray:
    """HTA's transform_correlation_to_index: link each kernel to its launch and back.

    Starts at min(correlation, 0); every (CPU op, GPU row) pair sharing a correlation id sets
    each side to the other's index, the last pair in merge order winning.
    """
    ic = np.minimum(t.correlation, 0).astype(np.int64)
    linked = kept & (t.correlation != -1)
    cpu_rows = np.flatnonzero(linked & ~is_gpu)
    gpu_rows = np.flatnonzero(linked & is_gpu)
    if not len(cpu_rows) or not len(gpu_rows):
        return ic
    # For a GPU row the last CPU row (file order) with its id wins; for a CPU row the last GPU row.
    ic[gpu_rows] = _last_partner(
        t.correlation[cpu_rows], cpu_rows, t.correlation[gpu_rows], fallback=ic[gpu_rows]
    )
    ic[cpu_rows] = _last_partner(
        t.correlation[gpu_rows], gpu_rows, t.correlation[cpu_rows], fallback=ic[cpu_rows]
    )
    return ic


def _last_partner(
    keys: np.ndarray, rows: np.ndarray, queries: np.ndarray, fallback: np.ndarray
) -> np.ndarray:
    order = np.lexsort((rows, keys))  # by key, then by row: the last of each run is the latest row
    keys_sorted, rows_sorted = keys[order], rows[order]
    pos = np.searchsorted(keys_sorted, queries, side="right") - 1
    pos_ok = pos >= 0
    pos_clipped = np.maximum(pos, 0)
    found = pos_ok & (keys_sorted[pos_clipped] == queries)
    return np.where(found, rows_sorted[pos_clipped], fallback)
