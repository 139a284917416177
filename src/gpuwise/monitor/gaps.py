"""Gaps in a GPU's history: stretches no sample stands for (the recorder was stopped, killed or paused; a
Prometheus server scraped nothing), found between two consecutive samples of one GPU.

A gap is never silently dropped and never guessed as busy or idle. What is known about it is said:
- energy: NVML's total-energy counter keeps counting while nobody reads it, so the counter at the
  samples on both sides gives the energy across the gap exactly (when it rose: a counter that went down
  was reset by a driver reload or a reboot);
- GPU-hours: when the counter ran on across the gap the GPU stayed powered and held, so the gap's
  hours are billed and counted as *estimated* GPU-hours (what happened in them is unknown); without a
  continuous counter they are *unknown* and not counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from gpuwise.monitor.energy import CONSECUTIVE_SLACK
from gpuwise.monitor.series import Gap, GpuSample

__all__ = ["Gap", "find_gaps"]


def find_gaps(samples: Sequence[GpuSample]) -> list[Gap]:
    """The gaps between consecutive samples (sorted by time): the later one's interval starts more than
    ``CONSECUTIVE_SLACK`` of that interval after the earlier one's end (the same rule the energy counter's
    deltas use, so every second is either a sample's, a gap's, or before the first sample)."""
    gaps = []
    for a, b in itertools.pairwise(samples):
        start = b.time_unix_s - b.interval_s
        if start - a.time_unix_s <= CONSECUTIVE_SLACK * b.interval_s:
            continue
        energy, span = None, b.time_unix_s - a.time_unix_s
        if not a.lost and not b.lost and a.energy_j is not None and b.energy_j is not None:
            delta = b.energy_j - a.energy_j
            if b.energy_delta_j is not None:  # an aggregate has its own interval's energy: the gap's alone
                delta, span = delta - b.energy_delta_j, start - a.time_unix_s
            energy = delta if delta >= 0 else None
        gaps.append(Gap(a.time_unix_s, start, energy, span))
    return gaps
