"""Energy from NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``), never from sampled
power: power is a 1 s average on Ampere and newer (instantaneous before), so power × time misses what
happens between samples; the counter does not.

A delta counts only between two consecutive readable samples with the counter rising: a counter that goes
down was reset (driver reload, GPU reset), and a gap (GPU lost, recorder stopped) has no reading at its
start; such an interval's energy is unknown (None), never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwise.monitor.series import GpuSample

# Two samples are consecutive when the later one's interval starts within this share of an interval of the
# earlier one's end (timer jitter of a 1 s loop on a loaded host stays well inside).
CONSECUTIVE_SLACK = 0.5


def counter_delta_j(
    prev_end_s: float, prev_j: float | None, start_s: float, interval_s: float, now_j: float | None
) -> float | None:
    """Energy of one interval from the counter at its two ends; None when it cannot be told."""
    if prev_j is None or now_j is None or abs(start_s - prev_end_s) > CONSECUTIVE_SLACK * interval_s:
        return None
    delta = now_j - prev_j
    return delta if delta >= 0 else None


def interval_energy_j(samples: Sequence[GpuSample]) -> list[float | None]:
    """Energy per sample (same order): the source's own delta where it has one, else the counter's."""
    out: list[float | None] = []
    prev: GpuSample | None = None
    for s in samples:
        if s.energy_delta_j is not None:
            out.append(s.energy_delta_j)
        elif prev is None or s.lost or prev.lost:
            out.append(None)
        else:
            start = s.time_unix_s - s.interval_s
            out.append(counter_delta_j(prev.time_unix_s, prev.energy_j, start, s.interval_s, s.energy_j))
        prev = s
    return out


__all__ = ["counter_delta_j", "interval_energy_j"]
