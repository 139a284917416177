"""`gpuwise monitor --record`: append every sample to the history store, one transaction per tick.

Safe as a long-lived service: a lost GPU is recorded as lost time and NVML is reopened every
`REOPEN_AFTER_S` until it answers again (a GPU reset or driver reload brings it back under a new handle);
no driver at all is recorded the same way for the GPUs last seen. SIGTERM and SIGKILL lose at most the
tick being written (each tick commits on its own; WAL).
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import time
from collections.abc import Callable

from gpuwise.monitor.energy import CONSECUTIVE_SLACK
from gpuwise.monitor.nvml_sample import REASON_BITS
from gpuwise.monitor.reading import GpuReading
from gpuwise.monitor.sampler import GpuSampler, NoNvml, Snapshot
from gpuwise.monitor.tiers import Downsampler, Retention
from gpuwise.store.history import MIB, HistoryStore

REOPEN_AFTER_S = 30.0  # a lost GPU or a missing driver is retried this often (NVML init costs ~100 ms)
# A sample stands for the time since the previous one, capped at this many intervals: a recorder that was
# paused (suspended host, stopped process) must not claim the gap as measured time.
MAX_INTERVALS_PER_SAMPLE = 2.0
_BITS = {name: bit for bit, name in REASON_BITS.items()}


class ResilientSampler:
    """A `GpuSampler` that reopens NVML while a GPU is lost or the driver is gone (same `sample` API)."""

    def __init__(
        self, factory: Callable[[], GpuSampler] = GpuSampler, reopen_after_s: float = REOPEN_AFTER_S
    ):
        # (hostname, index) -> (uuid, name) last recorded for it: names a GPU lost before this process
        # could read it (record_session sets it to the store's `last_identity`)
        self.identity: Callable[[str, int], tuple[str | None, str] | None] | None = None
        self._factory = factory
        self._reopen_after_s = reopen_after_s
        self._sampler: GpuSampler | None = factory()  # the first open fails loudly (NoNvml: exit 2)
        self._last_open = time.monotonic()
        self._known: Snapshot | None = None

    @property
    def count(self) -> int:
        """The GPUs the current sampler sees; 0 while NVML is gone."""
        return self._sampler.count if self._sampler is not None else 0

    def sample(self, host: bool = False) -> Snapshot:
        """One snapshot, like ``GpuSampler.sample``; reopens NVML (at most every ``reopen_after_s``) while a
        GPU is lost or the driver is gone, and reports the GPUs last seen as lost meanwhile. A lost GPU
        keeps the UUID and name it was recorded under.
        """
        due = time.monotonic() - self._last_open >= self._reopen_after_s
        if due and (self._sampler is None or any(g.lost for g in (self._known.gpus if self._known else []))):
            self._reopen()
        if self._sampler is None:
            return self._all_lost()
        snap = self._sampler.sample(host)
        self._name_lost(snap)
        self._known = snap
        return snap

    def _name_lost(self, snap: Snapshot) -> None:
        """A lost GPU without a UUID keeps the identity it was last seen under: this process's previous
        snapshot, else the history's last record for its host and index (lost before we started)."""
        known = {g.index: g for g in self._known.gpus} if self._known is not None else {}
        for g in snap.gpus:
            if not g.lost or g.uuid:
                continue
            if g.index in known and (known[g.index].uuid or known[g.index].name):
                g.uuid, g.name = known[g.index].uuid, known[g.index].name
            elif self.identity is not None and (found := self.identity(snap.hostname, g.index)):
                g.uuid, g.name = found
                g.not_available["identity"] = "last recorded identity (monitor history)"

    def _reopen(self) -> None:
        self._last_open = time.monotonic()
        if self._sampler is not None:
            self._sampler.close()
        try:
            self._sampler = self._factory()
        except NoNvml:
            self._sampler = None

    def _all_lost(self) -> Snapshot:
        """No NVML: the GPUs last seen, each lost (their time is lost time, not missing time)."""
        known = self._known
        snap = Snapshot(time.time(), known.hostname if known else "", known.driver_version if known else None)
        for g in known.gpus if known else []:
            snap.gpus.append(
                GpuReading(g.index, g.name, g.uuid, lost=True, not_available={"gpu": "NVML gone"})
            )
        return snap

    def close(self) -> None:
        """Close the current sampler, if NVML is open."""
        if self._sampler is not None:
            self._sampler.close()


class Recorder:
    """Writes snapshots to the store and keeps its tiers; `record(snapshot)` is one tick."""

    def __init__(self, store: HistoryStore, interval_s: float, retention: Retention | None = None) -> None:
        self.store = store
        self.interval_s = interval_s
        self.downsampler = Downsampler(store, retention or Retention())
        self._last_s: float | None = None
        self._failing: str | None = None
        # gpu row id -> (end ms, energy counter mJ) of its last sample, from the store on first sight
        self._last: dict[int, tuple[int, int | None] | None] = {}

    def tick(self, snap: Snapshot) -> bool:
        """`record`, but a failed write (disk full, I/O error, a lock held past the timeout) loses this tick
        only: a service keeps sampling and says so once per kind of failure on stderr."""
        try:
            self.record(snap)
        except sqlite3.OperationalError as err:
            if str(err) != self._failing:
                print(f"gpuwise: warning: sample not recorded: {err} ({self.store.path})", file=sys.stderr)
            self._failing = str(err)
            return False
        if self._failing is not None:
            print("gpuwise: recording again", file=sys.stderr)
            self._failing = None
        return True

    def record(self, snap: Snapshot) -> None:
        """Write one snapshot in one transaction, then let the downsampler roll and prune.

        Each sample stands for the time since the previous one, capped at ``MAX_INTERVALS_PER_SAMPLE``
        intervals. A failed write rolls back and raises (``tick`` is the forgiving caller).
        """
        now = snap.time_unix_s
        gap = self.interval_s if self._last_s is None else now - self._last_s
        interval_ms = round(1000 * min(max(gap, 0.0), MAX_INTERVALS_PER_SAMPLE * self.interval_s))
        self._last_s = now
        t_ms = round(now * 1000)
        store, conn = self.store, self.store.conn
        conn.execute("BEGIN")
        try:
            rows, procs = [], []
            for r in snap.gpus:
                gpu = store.gpu_id(snap.hostname, r.index, r.uuid, r.name, r.memory_total_bytes)
                rows.append(_row(t_ms, gpu, interval_ms, r))
                self._gap(gpu, t_ms, interval_ms, rows[-1][9])
                if r.energy_j is not None:
                    store.mark_energy_counter(gpu)
                for p in r.processes or []:
                    proc = store.proc_id(p.pid, p.user, p.name)
                    mem = None if p.gpu_memory_bytes is None else round(p.gpu_memory_bytes / MIB)
                    procs.append((0, t_ms, gpu, proc, interval_ms, mem, p.sm_pct))
            conn.executemany(
                "INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            conn.executemany("INSERT OR REPLACE INTO proc_samples VALUES (?, ?, ?, ?, ?, ?, ?)", procs)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            raise
        self.downsampler.step(t_ms)

    def _gap(self, gpu: int, t_ms: int, interval_ms: int, energy_mj: int | None) -> None:
        """Write down the time before this sample that no sample stands for (a restart after a kill, a
        paused process: beyond ``MAX_INTERVALS_PER_SAMPLE``), with the energy counter at both sides."""
        if gpu not in self._last:
            self._last[gpu] = self.store.last_sample(gpu)
        last, start = self._last[gpu], t_ms - interval_ms
        if last is not None and start - last[0] > CONSECUTIVE_SLACK * interval_ms:
            self.store.add_gap(gpu, last[0], start, last[1], (t_ms, energy_mj))
        self._last[gpu] = (t_ms, energy_mj)


def _row(t_ms: int, gpu: int, interval_ms: int, r: GpuReading) -> tuple:
    if r.lost:
        return (0, t_ms, gpu, 0, interval_ms, None, None, None, None, None, None, None, None, None)
    mask = None
    if r.throttle_reasons is not None:
        mask = sum(_BITS.get(name, 0) for name in r.throttle_reasons)
    return (
        0,
        t_ms,
        gpu,
        interval_ms,
        None,
        None,
        r.busy_pct,
        None if r.memory_used_bytes is None else round(r.memory_used_bytes / MIB),
        None if r.power_w is None else round(r.power_w * 1000),
        None if r.energy_j is None else round(r.energy_j * 1000),
        None,
        None if r.temperature_c is None else round(r.temperature_c),
        mask,
        None,
    )


def run(
    sampler: ResilientSampler,
    recorder: Recorder,
    interval_s: float,
    ticks: int | None = None,
    on_tick: Callable[[Snapshot], None] | None = None,
) -> int:
    """Headless loop (`--record --quiet`): sample, record, sleep to the next tick; returns ticks done."""
    done = 0
    next_at = time.monotonic()
    while ticks is None or done < ticks:
        snap = sampler.sample()
        if on_tick is not None:
            on_tick(snap)
        recorder.tick(snap)
        done += 1
        next_at += interval_s
        time.sleep(max(0.0, next_at - time.monotonic()))
    return done


__all__ = ["Recorder", "ResilientSampler", "run"]
