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
    i = 0
    for j, lower in enumerate(edges):
        if value >= lower:
            i = j
    return i


@dataclass
class Tally:
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

    def busy_mean(self) -> float | None:
        return self.busy_sum / self.busy_known_h if self.busy_known_h else None

    def busy_in_use(self) -> float | None:
        return self.in_use_busy_sum / self.in_use_h if self.in_use_h else None


def tally(samples: list[GpuSample]) -> Tally:
    t = Tally()
    idle_pct, kpi_pct = T.MONITOR_IDLE_BUSY_PCT, T.MONITOR_BUSY_KPI_PCT
    low, high = T.MONITOR_HEADROOM_LOW_PCT, T.MONITOR_HEADROOM_HIGH_PCT
    idle_flags = t.idle
    total = next((s.memory_total_bytes for s in samples if s.memory_total_bytes), None)
    t.memory_total_bytes = total
    peak: int | None = None
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
            t.busy_known_h += hours
            t.busy_sum += busy * hours
            t.busy_bands_h[_band(busy, BUSY_EDGES)] += hours
            if is_idle:
                t.idle_h += hours
            else:
                t.in_use_h += hours
                t.in_use_busy_sum += busy * hours
                if busy >= kpi_pct:
                    t.at_kpi_h += hours
        used = s.memory_used_bytes
        if used is not None:
            peak = used if peak is None or used > peak else peak
            if total:
                t.memory_known_h += hours
                headroom = 100 * (1 - used / total)
                t.headroom_bands_h[_band(headroom, HEADROOM_EDGES)] += hours
                if low <= headroom <= high:
                    t.headroom_in_band_h += hours
        if s.throttle_s:
            slowed = 0.0
            for reason, seconds in s.throttle_s.items():
                t.throttle_h[reason] = t.throttle_h.get(reason, 0.0) + seconds / 3600
                if reason in _SLOWING and seconds > slowed:
                    slowed = seconds
            t.slowed_h += min(s.interval_s, slowed) / 3600
        if s.power_w is not None:
            t.power_sum += s.power_w * s.interval_s
            t.power_s += s.interval_s
        temp = s.temperature_c
        if temp is not None and (t.temperature_max_c is None or temp > t.temperature_max_c):
            t.temperature_max_c = temp
    t.memory_peak_bytes = peak
    return t


__all__ = ["BUSY_EDGES", "HEADROOM_EDGES", "Tally", "tally"]
