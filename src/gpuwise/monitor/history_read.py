"""The local store as a `History` (the same types `prometheus_source.load_history` fills).

One resolution per window, the coarsest that keeps a report honest and fast: raw samples up to
`RAW_WINDOW_S`, 1-min buckets up to `MINUTE_WINDOW_S` (so `--since 7d` reads minutes), 1-h beyond: the
unit clouds bill by, and a month of minutes for 8 GPUs would be 700,000 Python objects (~10 s on a loaded
core). Where that tier has been pruned the next coarser one fills in before it, and the finer one after
its last completed bucket (the minute in progress), each piece cut at a bucket edge so no time counts
twice.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import replace

from gpuwise.monitor.nvml_sample import decode_reasons
from gpuwise.monitor.series import Gap, GpuSample, GpuSeries, History, ProcessSample, ProcessSeries
from gpuwise.monitor.tiers import BUCKET_MS, HOUR, MINUTE, RAW, TIER_NAMES
from gpuwise.store.history import MIB, HistoryStore

RAW_WINDOW_S = 6 * 3600
MINUTE_WINDOW_S = 8 * 86400
ORDER = (HOUR, MINUTE, RAW)  # coarse to fine
SOURCES = {
    "busy_pct": "NVML utilization.gpu (busy: a kernel ran; not SM occupancy)",
    "memory_used_bytes": "NVML memory info (max per bucket)",
    "power_w": "NVML power usage (1 s average on Ampere+, instantaneous before; mean per bucket)",
    "energy_j": "NVML total-energy counter deltas (nvmlDeviceGetTotalEnergyConsumption)",
    "throttle_s": "NVML clock-event reasons (seconds active)",
    "processes": "NVML running processes (memory) and process utilization (SM share); user/name from psutil",
}


def main_tier(window_s: float) -> int:
    """The tier a window of ``window_s`` seconds is read at: raw up to ``RAW_WINDOW_S``, 1-min up to
    ``MINUTE_WINDOW_S``, 1-h beyond.
    """
    return RAW if window_s <= RAW_WINDOW_S else MINUTE if window_s <= MINUTE_WINDOW_S else HOUR


def _align_up(t: int, bucket: int) -> int:
    return math.ceil(t / bucket) * bucket


def _covers_from(tier: int, first_ms: int) -> int:
    """Where a tier's data starts (exclusive bound): an aggregate covers its whole first bucket."""
    return first_ms - BUCKET_MS[tier] if tier != RAW else first_ms - 1


def plan(store: HistoryStore, lo: int, hi: int, tier: int) -> list[tuple[int, int, int]]:
    """(tier, lo, hi] pieces covering (lo, hi]: ``tier`` where it has data, coarser before, finer after."""
    spans = {t: store.time_range_ms(t) for t in ORDER}
    idx = ORDER.index(tier)
    while spans[ORDER[idx]] is None and idx + 1 < len(ORDER):  # nothing rolled up yet: use finer
        idx += 1
    span = spans[ORDER[idx]]
    if span is None:
        return []
    end = min(span[1], hi)
    return _before(spans, idx, lo, end) + _after(spans, idx + 1, max(lo, end), hi)


def _before(spans: dict, c: int, lo: int, until: int) -> list[tuple[int, int, int]]:
    """Cover (lo, until] with tier ORDER[c] from where its data starts, coarser tiers before that."""
    if c < 0 or until <= lo:
        return []
    tier, span = ORDER[c], spans[ORDER[c]]
    if span is None:
        return _before(spans, c - 1, lo, until)
    boundary = lo
    if c > 0:  # cut at the coarser tier's bucket edge: its bucket holds everything this tier had there
        boundary = max(lo, min(until, _align_up(_covers_from(tier, span[0]), BUCKET_MS[ORDER[c - 1]])))
        coarser = spans[ORDER[c - 1]]
        if coarser is None or coarser[1] < boundary:  # not rolled up that far: this tier alone
            boundary = lo
    own = [(tier, boundary, until)] if until > boundary else []
    return _before(spans, c - 1, lo, boundary) + own


def _after(spans: dict, f: int, since: int, hi: int) -> list[tuple[int, int, int]]:
    """Cover (since, hi] with the finer tiers: the buckets not rolled up yet."""
    if f >= len(ORDER) or since >= hi:
        return []
    span = spans[ORDER[f]]
    if span is None:
        return _after(spans, f + 1, since, hi)
    end = min(max(span[1], since), hi)
    own = [(ORDER[f], since, end)] if end > since else []
    return own + _after(spans, f + 1, end, hi)


def load_local_history(store: HistoryStore, start_unix_s: float, end_unix_s: float) -> History:
    """The store's samples in the window (Unix s, start exclusive, end inclusive) as a ``History``, read at
    ``main_tier``'s resolution with pruned stretches filled from the neighbouring tiers.

    GPUs without a sample in the window are left out; the note names the tiers and hours read.
    """
    lo, hi = round(start_unix_s * 1000), round(end_unix_s * 1000)
    tier = main_tier(end_unix_s - start_unix_s)
    pieces = plan(store, lo, hi, tier)
    gpus = store.gpus()
    totals = {g.id: g.memory_total_bytes for g in gpus}
    samples: dict[int, list[GpuSample]] = defaultdict(list)
    proc_samples: dict[tuple[int, int], list[ProcessSample]] = defaultdict(list)
    for t, a, b in pieces:
        piece: dict[int, list[GpuSample]] = defaultdict(list)
        for row in store.conn.execute(
            "SELECT t_ms, gpu, read_ms, lost_ms, busy_pct, mem_mib, power_mw, energy_mj, energy_j, temp_c, "
            "reasons, throttle FROM samples WHERE tier=? AND t_ms > ? AND t_ms <= ? ORDER BY t_ms",
            (t, a, b),
        ):
            piece[row[1]].extend(_samples(row, t, totals.get(row[1])))
        for gpu, own in piece.items():  # raw rows of two recorders overlap; tiers meet at bucket edges
            samples[gpu].extend(without_overlap(own) if t == RAW else own)
        for row in store.conn.execute(
            "SELECT t_ms, gpu, proc, read_ms, mem_mib, sm_pct FROM proc_samples WHERE tier=? AND t_ms > ? "
            "AND t_ms <= ? ORDER BY t_ms",
            (t, a, b),
        ):
            mem = None if row[4] is None else row[4] * MIB
            proc_samples[(row[1], row[2])].append(ProcessSample(row[0] / 1000, row[3] / 1000, mem, row[5]))
    procs = store.procs()
    gaps = _recorded_gaps(store, lo, hi) if store.has_gap_table() else None
    series = []
    for g in gpus:
        if g.id not in samples:
            continue
        processes = [
            ProcessSeries(procs[p][0], procs[p][1], procs[p][2], ps)
            for (gpu, p), ps in sorted(proc_samples.items())
            if gpu == g.id
        ]
        sources = dict(SOURCES)
        if not g.energy_counter:
            sources["energy_j"] = "not available: NVML has no total-energy counter on this GPU"
        own = samples[g.id]
        mine = None if gaps is None else gaps.get(g.id, [])
        series.append(GpuSeries(g.hostname, g.gpu_index, g.uuid, g.name, own, processes, sources, mine))
    names = ", ".join(f"{TIER_NAMES[t]} {(b - a) / 3.6e6:.1f} h" for t, a, b in pieces) or "no data"
    return History(
        start_unix_s,
        end_unix_s,
        series,
        f"local store {store.path}",
        notes=[f"read at {TIER_NAMES[tier]} resolution ({names})"],
    )


def _recorded_gaps(store: HistoryStore, lo: int, hi: int) -> dict[int, list[Gap]]:
    """The gaps the recorder wrote, per GPU row id, cut to the window (lo, hi] ms; a cut gap keeps the
    share of its counter rise that falls inside (the counter's rate over a gap is not known: even)."""
    out: dict[int, list[Gap]] = defaultdict(list)
    for gpu, start, end, before, after, after_t in store.gaps(lo, hi):
        a, b = max(start, lo), min(end, hi)
        span = after_t - start
        energy = None
        if before is not None and after is not None and after >= before and b == end and span > 0:
            energy = (after - before) / 1000 * (after_t - a) / span
        out[gpu].append(Gap(a / 1000, b / 1000, energy, (after_t - a) / 1000))
    return out


def without_overlap(samples: list[GpuSample]) -> list[GpuSample]:
    """The samples of one GPU (keyed by its UUID, sorted by time) with no second counted twice: a sample
    whose interval reaches back before the previous sample's end keeps only the time after it, and one
    at or before that end is dropped. The second guard behind the store's writer lock: two recorders that
    wrote one store anyway (an old gpuwise, a lock on a network file system) interleave their samples,
    and each would otherwise claim its full interval (GPU-hours 2x)."""
    out: list[GpuSample] = []
    end: float | None = None
    for s in samples:
        if end is not None and s.time_unix_s - s.interval_s < end:
            keep = s.time_unix_s - end
            if keep <= 1e-6:
                continue
            throttle = {k: min(v, keep) for k, v in s.throttle_s.items()}
            s = replace(s, interval_s=keep, throttle_s=throttle)
        out.append(s)
        end = s.time_unix_s if end is None else max(end, s.time_unix_s)
    return out


def _samples(row: tuple, tier: int, total: int | None) -> list[GpuSample]:
    t_ms, _, read_ms, lost_ms, busy, mem, power, counter, energy, temp, reasons, throttle = row
    out = []
    t = t_ms / 1000
    if lost_ms:
        out.append(GpuSample(t - read_ms / 1000, lost_ms / 1000, lost=True))
    if read_ms:
        if tier == RAW:
            seconds = {r: read_ms / 1000 for r in decode_reasons(int(reasons))} if reasons else {}
        else:
            seconds = json.loads(throttle) if throttle else {}
        out.append(
            GpuSample(
                t,
                read_ms / 1000,
                busy_pct=busy,
                memory_used_bytes=None if mem is None else mem * MIB,
                memory_total_bytes=total,
                power_w=None if power is None else power / 1000,
                energy_j=None if counter is None else counter / 1000,
                energy_delta_j=energy,
                temperature_c=None if temp is None else float(temp),
                throttle_s=seconds,
            )
        )
    return out


__all__ = ["load_local_history", "main_tier", "without_overlap"]
