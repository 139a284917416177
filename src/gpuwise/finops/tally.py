"""One pass over a GPU's samples: every time-weighted sum the FinOps report needs, in hours.

A single loop because a 30-day, 1-min history is ~43,000 samples per GPU and the report must stay within
seconds (benchmarks/monitor_report_speed.py); each figure is defined in docs/monitoring.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwise.diagnose import thresholds as T
from gpuwise.monitor.kpi import SLOWING_REASONS
from gpuwise.monitor.series import GpuSample

# Busy % bands (lower edges) and memory-headroom bands, from the monitor KPIs.
BUSY_EDGES = (0.0, T.MONITOR_IDLE_BUSY_PCT, T.LOW_UTIL_MODERATE_PCT, T.MONITOR_BUSY_KPI_PCT)
HEADROOM_EDGES = (
    -1e9,
    T.MONITOR_HEADROOM_LOW_PCT,
    T.MONITOR_HEADROOM_HIGH_PCT,
    T.FINOPS_OVERSIZED_HEADROOM_PCT,
)
_SLOWING = frozenset(SLOWING_REASONS)


def _band(value: float, edges: tuple[float, ...]) -> int:
    """Index of the band `value` falls in (the last lower edge it reaches)."""
    i = 0
    for j, lower in enumerate(edges):
        if value >= lower:
            i = j
    return i


@dataclass
class Tally:
    """One GPU's time-weighted sums over a window (hours; busy_sum in busy % × h, power_sum in W × s)."""

    observed_h: float = 0.0
    lost_h: float = 0.0
    read_h: float = 0.0
    idle_h: float = 0.0
    busy_known_h: float = 0.0
    busy_sum: float = 0.0  # busy % × hours
    in_use_h: float = 0.0
    in_use_busy_sum: float = 0.0
    at_kpi_h: float = 0.0
    busy_bands_h: list[float] = field(default_factory=lambda: [0.0] * len(BUSY_EDGES))
    memory_total_bytes: int | None = None
    memory_peak_bytes: int | None = None
    memory_known_h: float = 0.0
    headroom_bands_h: list[float] = field(default_factory=lambda: [0.0] * len(HEADROOM_EDGES))
    headroom_in_band_h: float = 0.0
    throttle_h: dict[str, float] = field(default_factory=dict)
    slowed_h: float = 0.0
    power_sum: float = 0.0  # W × s
    power_s: float = 0.0
    temperature_max_c: float | None = None
    idle: list[bool] = field(default_factory=list)  # per sample, for the attribution
    memory_peak_in_use_bytes: int | None = None  # peak over the samples not idle (the work's peak)
    idle_held_h: float = 0.0  # idle hours with at least IDLE_MEMORY_HELD_MIN_PCT of the memory used
    idle_held_max_bytes: int | None = None  # most memory used while idle

    def busy_mean(self) -> float | None:
        """Mean busy % over the hours with a busy reading; None without one."""
        return self.busy_sum / self.busy_known_h if self.busy_known_h else None

    def busy_in_use(self) -> float | None:
        """Mean busy % over the in-use (not idle) hours; None when the GPU was never in use."""
        return self.in_use_busy_sum / self.in_use_h if self.in_use_h else None

    def _add_busy(self, busy: float, is_idle: bool, hours: float) -> None:
        """A sample's busy % for `hours`: its band, and idle or in-use (at the KPI or below)."""
        self.busy_known_h += hours
        self.busy_sum += busy * hours
        self.busy_bands_h[_band(busy, BUSY_EDGES)] += hours
        if is_idle:
            self.idle_h += hours
        else:
            self.in_use_h += hours
            self.in_use_busy_sum += busy * hours
            if busy >= T.MONITOR_BUSY_KPI_PCT:
                self.at_kpi_h += hours

    def _add_memory(self, used: int, hours: float) -> None:
        """A sample's used bytes: the peak, and with a known total the headroom band for `hours`."""
        peak = self.memory_peak_bytes
        self.memory_peak_bytes = used if peak is None or used > peak else peak
        total = self.memory_total_bytes
        if total:
            self.memory_known_h += hours
            headroom = 100 * (1 - used / total)
            self.headroom_bands_h[_band(headroom, HEADROOM_EDGES)] += hours
            if T.MONITOR_HEADROOM_LOW_PCT <= headroom <= T.MONITOR_HEADROOM_HIGH_PCT:
                self.headroom_in_band_h += hours

    def _add_held(self, used: int, is_idle: bool, hours: float) -> None:
        """Used bytes by whether the GPU idled: the work's peak (in use), or memory held while idle."""
        if not is_idle:
            peak = self.memory_peak_in_use_bytes
            self.memory_peak_in_use_bytes = used if peak is None or used > peak else peak
            return
        held = self.idle_held_max_bytes
        self.idle_held_max_bytes = used if held is None or used > held else held
        total = self.memory_total_bytes
        if total and 100 * used / total >= T.IDLE_MEMORY_HELD_MIN_PCT:
            self.idle_held_h += hours

    def _add_throttle(self, throttle_s: dict[str, float], interval_s: float) -> None:
        """Hours per throttle reason, and the slowed time: the longest slowing reason, within the interval."""
        slowed = 0.0
        for reason, seconds in throttle_s.items():
            self.throttle_h[reason] = self.throttle_h.get(reason, 0.0) + seconds / 3600
            if reason in _SLOWING and seconds > slowed:
                slowed = seconds
        self.slowed_h += min(interval_s, slowed) / 3600


def tally(samples: list[GpuSample]) -> Tally:
    """Every time-weighted sum of one GPU's samples (in hours), in one pass; lost samples count as
    observed and lost only, and `idle` gets one flag per sample (False for a lost one)."""
    t = Tally()
    idle_pct = T.MONITOR_IDLE_BUSY_PCT
    idle_flags = t.idle
    t.memory_total_bytes = next((s.memory_total_bytes for s in samples if s.memory_total_bytes), None)
    for s in samples:
        hours = s.interval_s / 3600
        t.observed_h += hours
        if s.lost:
            t.lost_h += hours
            idle_flags.append(False)
            continue
        t.read_h += hours
        busy = s.busy_pct
        is_idle = busy is not None and busy < idle_pct
        idle_flags.append(is_idle)
        if busy is not None:
            t._add_busy(busy, is_idle, hours)
        if s.memory_used_bytes is not None:
            t._add_memory(s.memory_used_bytes, hours)
            t._add_held(s.memory_used_bytes, is_idle, hours)
        if s.throttle_s:
            t._add_throttle(s.throttle_s, s.interval_s)
        if s.power_w is not None:
            t.power_sum += s.power_w * s.interval_s
            t.power_s += s.interval_s
        temp = s.temperature_c
        if temp is not None and (t.temperature_max_c is None or temp > t.temperature_max_c):
            t.temperature_max_c = temp
    return t


__all__ = ["BUSY_EDGES", "HEADROOM_EDGES", "Tally", "tally"]
