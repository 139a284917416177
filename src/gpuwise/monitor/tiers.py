"""Downsampling tiers and retention of the monitor history: raw → 1-min → 1-h, done by the recorder itself.

Each tier row keeps what the FinOps report needs and nothing it cannot sum: readable and lost time,
sample count, mean busy %, max memory, mean power, the energy counter's last value and the energy of the
interval (counter deltas, `energy.py`), max temperature, and seconds per throttle reason. Per-process rows
keep time present, max memory and mean SM share.

The work is incremental and bounded: each tick rolls at most `MAX_BUCKETS_PER_STEP` completed buckets per
tier (catching up after a restart is spread over ticks) and deletes rows past retention in slices of at
most `PRUNE_SLICE_S` of history, only once the next tier has rolled them up.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from gpuwise.errors import GpuwiseError
from gpuwise.monitor.energy import counter_delta_j
from gpuwise.monitor.nvml_sample import decode_reasons
from gpuwise.store.history import HistoryStore

RAW, MINUTE, HOUR = 0, 1, 2
BUCKET_MS = {MINUTE: 60_000, HOUR: 3_600_000}
TIER_NAMES = {RAW: "raw", MINUTE: "1-min", HOUR: "1-h"}
MAX_BUCKETS_PER_STEP = 5
PRUNE_SLICE_S = 3600
GRACE_MS = 2_000  # a bucket is complete this long after its end (the last tick of it has been written)
PRUNE_EVERY_MS = 10_000  # retention is checked this often (of sample time), not at every tick
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, flag: str) -> float:
    """'90s', '30m', '24h', '7d', '2w' → seconds; one clear line otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if not match or float(match.group(1)) <= 0:
        raise GpuwiseError(f"{flag}: expected a duration such as 90s, 30m, 24h, 7d or 2w (got {text!r})")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_until(text: str, now_s: float) -> float:
    """``--until``: a duration ago ("2h"), an ISO 8601 time ("2026-11-28T06:00Z", UTC when no zone is
    given) or Unix seconds, as Unix seconds; GpuwiseError (one line) for anything else or a future time."""
    import datetime as dt

    try:
        value = float(text)
    except ValueError:
        try:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            try:
                value = now_s - parse_duration(text, "--until")
            except GpuwiseError:
                raise GpuwiseError(
                    f"--until: {text!r} is neither a duration ago (2h), an ISO time (2026-11-28T06:00Z) "
                    "nor Unix seconds"
                ) from None
        else:
            value = (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()
    if value > now_s + 1:
        raise GpuwiseError(f"--until is in the future ({text}): the window must end by now")
    return value


@dataclass(frozen=True)
class Retention:
    """How long each tier is kept (None: forever). Defaults: raw 6 h, 1-min 30 days, 1-h forever: raw rows at
    1 Hz dominate the file, and 6 h keeps 8 GPUs × 30 days under the 50 MB budget (docs/monitoring.md)."""

    raw_s: float | None = 6 * 3600
    minute_s: float | None = 30 * 86400
    hour_s: float | None = None

    def of(self, tier: int) -> float | None:
        """How long ``tier`` (``RAW``, ``MINUTE`` or ``HOUR``) is kept, in seconds; None: forever."""
        return (self.raw_s, self.minute_s, self.hour_s)[tier]


def _rolled_key(tier: int) -> str:
    return f"rolled_until_ms_{tier}"


class Downsampler:
    """Rolls completed buckets into the next tier and prunes, a bounded amount per `step`."""

    def __init__(self, store: HistoryStore, retention: Retention) -> None:
        self.store = store
        self.retention = retention
        self._rolled: dict[int, int | None] = {}
        self._next_prune_ms = 0

    def step(self, now_ms: int) -> int:
        """One bounded round (the recorder calls it after each tick); returns buckets written."""
        written = 0
        for tier in (MINUTE, HOUR):
            written += self._roll(tier, now_ms)
        if now_ms >= self._next_prune_ms:
            self._next_prune_ms = now_ms + PRUNE_EVERY_MS
            for tier in (RAW, MINUTE, HOUR):
                self._prune(tier, now_ms)
        return written

    def rolled_until_ms(self, tier: int) -> int | None:
        """How far (Unix ms) the finer tier has been rolled into ``tier``, from the store's metadata
        (cached); None before the first roll."""
        if tier not in self._rolled:
            value = self.store.meta(_rolled_key(tier))
            self._rolled[tier] = None if value is None else int(value)
        return self._rolled[tier]

    def _set_rolled(self, tier: int, until_ms: int) -> None:
        self.store.set_meta(_rolled_key(tier), str(until_ms))
        self._rolled[tier] = until_ms

    def _roll(self, tier: int, now_ms: int) -> int:
        bucket, conn = BUCKET_MS[tier], self.store.conn
        done = self.rolled_until_ms(tier)
        if done is None:
            first = conn.execute("SELECT min(t_ms) FROM samples WHERE tier=?", (tier - 1,)).fetchone()[0]
            if first is None:
                return 0
            done = (int(first) - 1) // bucket * bucket
        limit = (now_ms - GRACE_MS) // bucket * bucket
        written, skipped = 0, False
        while written < MAX_BUCKETS_PER_STEP and done < limit:
            nxt = conn.execute(
                "SELECT min(t_ms) FROM samples WHERE tier=? AND t_ms > ?", (tier - 1, done)
            ).fetchone()[0]
            if nxt is None:
                done, skipped = limit, True  # nothing recorded since: nothing to roll
                break
            start = max(done, (int(nxt) - 1) // bucket * bucket)  # skip a gap (recorder stopped) at once
            end = start + bucket
            if end > limit:
                break
            conn.execute("BEGIN")
            try:
                self._aggregate(tier, start, end)
                done = end
                self.store.set_meta(_rolled_key(tier), str(done))
                conn.execute("COMMIT")
                self._rolled[tier] = done
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            written += 1
        if skipped:
            self._set_rolled(tier, done)
        return written

    def _aggregate(self, tier: int, start: int, end: int) -> None:
        conn, source = self.store.conn, tier - 1
        # the raw row before the bucket, for its first energy delta: samples are at most 2 intervals of at
        # most 60 s apart (recorder.MAX_INTERVALS_PER_SAMPLE, the CLI's --interval bound)
        lookback = 121_000 if source == RAW else 0
        rows = conn.execute(
            "SELECT t_ms, gpu, read_ms, lost_ms, n, busy_pct, mem_mib, power_mw, energy_mj, energy_j, "
            "temp_c, reasons, throttle FROM samples WHERE tier=? AND t_ms > ? AND t_ms <= ? "
            "ORDER BY gpu, t_ms",
            (source, start - lookback, end),
        ).fetchall()
        by_gpu: dict[int, list[tuple]] = defaultdict(list)
        for row in rows:
            by_gpu[row[1]].append(row)
        out = [
            _bucket_row(tier, end, gpu, source, [r for r in rs if r[0] > start], rs)
            for gpu, rs in by_gpu.items()
        ]
        conn.executemany(
            "INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [r for r in out if r is not None],
        )
        procs = conn.execute(
            "SELECT gpu, proc, sum(read_ms), max(mem_mib), sum(sm_pct * read_ms), "
            "sum(CASE WHEN sm_pct IS NULL THEN 0 ELSE read_ms END) FROM proc_samples "
            "WHERE tier=? AND t_ms > ? AND t_ms <= ? GROUP BY gpu, proc",
            (source, start, end),
        ).fetchall()
        conn.executemany(
            "INSERT OR REPLACE INTO proc_samples VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(tier, end, g, p, read, mem, sm / w if w else None) for g, p, read, mem, sm, w in procs],
        )

    def _prune(self, tier: int, now_ms: int) -> None:
        keep = self.retention.of(tier)
        if keep is None:
            return
        cutoff = now_ms - int(keep * 1000)
        if tier < HOUR:  # never drop rows the next tier has not rolled up yet
            rolled = self.rolled_until_ms(tier + 1)
            cutoff = min(cutoff, rolled if rolled is not None else 0)
        span = self.store.time_range_ms(tier)
        if span is None or span[0] > cutoff:
            return
        cutoff = min(cutoff, span[0] + PRUNE_SLICE_S * 1000)
        conn = self.store.conn
        conn.execute("BEGIN")
        conn.execute("DELETE FROM samples WHERE tier=? AND t_ms < ?", (tier, cutoff))
        conn.execute("DELETE FROM proc_samples WHERE tier=? AND t_ms < ?", (tier, cutoff))
        conn.execute("COMMIT")


def _bucket_row(
    tier: int, end: int, gpu: int, source: int, rows: list[tuple], with_prev: list[tuple]
) -> tuple | None:
    """One aggregate row (the `samples` columns, in order) for `gpu`'s bucket ending at `end` ms, from the
    `rows` of the finer tier inside it; `with_prev` adds the raw row before the bucket, for the first
    energy delta. None when the bucket has no row for this GPU."""
    if not rows:
        return None
    if source == RAW:
        energy, throttle = _from_raw(with_prev, end - BUCKET_MS[tier])
    else:
        energy, throttle = _from_aggregates(rows)
    power = _weighted_mean(rows, 7)
    counters = [r[8] for r in rows if r[8] is not None]
    return (
        tier,
        end,
        gpu,
        sum(r[2] for r in rows),
        sum(r[3] or 0 for r in rows) or None,
        sum(r[4] or 1 for r in rows),
        _weighted_mean(rows, 5),
        _max_of(r[6] for r in rows),
        None if power is None else round(power),
        counters[-1] if counters else None,
        sum(energy) if energy else None,
        _max_of(r[10] for r in rows),
        None,
        json.dumps({k: round(v, 3) for k, v in sorted(throttle.items())}) if throttle else None,
    )


def _weighted_mean(rows: list[tuple], column: int) -> float | None:
    """Mean of `column` over the rows that have it, weighted by their readable ms (column 2)."""
    return _mean([(r[column], r[2]) for r in rows if r[column] is not None and r[2]])


def _from_raw(with_prev: list[tuple], start: int) -> tuple[list[float], dict[str, float]]:
    """Energy deltas (J) and seconds per throttle reason of the raw rows after `start` ms: a delta needs
    the row before it readable too (the one before the bucket included), a reason counts its row's
    readable time."""
    throttle: dict[str, float] = defaultdict(float)
    energy: list[float] = []
    prev: tuple | None = None
    for r in with_prev:
        inside = r[0] > start
        if inside and prev is not None and not r[3] and not prev[3]:
            d = counter_delta_j(
                prev[0] / 1000,
                None if prev[8] is None else prev[8] / 1000,
                (r[0] - r[2]) / 1000,
                r[2] / 1000,
                None if r[8] is None else r[8] / 1000,
            )
            if d is not None:
                energy.append(d)
        if inside and r[11]:
            for reason in decode_reasons(int(r[11])):
                throttle[reason] += r[2] / 1000
        prev = r
    return energy, throttle


def _from_aggregates(rows: list[tuple]) -> tuple[list[float], dict[str, float]]:
    """Energy (J) and seconds per throttle reason of finer aggregate rows: their own sums, added."""
    throttle: dict[str, float] = defaultdict(float)
    for r in rows:
        for reason, s in json.loads(r[12] or "{}").items():
            throttle[reason] += s
    return [r[9] for r in rows if r[9] is not None], throttle


def _max_of(values: Iterable[int | None]) -> int | None:
    """The largest known value; None when none is known."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _mean(pairs: list[tuple[float, float]]) -> float | None:
    weight = sum(w for _, w in pairs)
    return None if not weight else sum(v * w for v, w in pairs) / weight


__all__ = ["HOUR", "MINUTE", "RAW", "Downsampler", "Retention", "parse_duration", "parse_until"]
