"""Values no profiler writes, dropped or repaired before analysis, each kind counted in one warning.

Real traces never hold them (the HTA agreement is unchanged); damaged ones do, and one such value
must not turn the whole breakdown into nonsense: a single ``ts: 1e308`` stretches the span to 300
digits, a ``dur: 1e300`` makes the trace "100 % compute", a kernel whose ``args.stream`` is not a
number falls off every device statistic.
"""

from __future__ import annotations

import numpy as np

from gpuwise.trace.breakdown import IDLE_KERNEL_CATS
from gpuwise.trace.table import EventTable

__all__ = ["MAX_EVENT_US", "MAX_TIME_US", "drop_out_of_range", "recover_streams"]

# A double holds every integer µs up to 2**53 (285 years after 1970): a timestamp beyond it is not a
# clock reading, and sums and differences of such values lose the microseconds the analysis needs.
MAX_TIME_US = float(2**53)
# A profiler window is seconds to minutes long; no single op, kernel or copy runs for a day.
MAX_EVENT_US = 24 * 3600 * 1e6


def drop_out_of_range(t: EventTable) -> list[str]:
    """Timestamps beyond MAX_TIME_US and durations beyond MAX_EVENT_US become NaN (ignored)."""
    with np.errstate(invalid="ignore"):
        bad_ts = np.abs(t.ts) > MAX_TIME_US
        bad_dur = (t.dur > MAX_EVENT_US) & ~bad_ts & ~np.isnan(t.ts)  # NaN ts: already counted
    if not (bad_ts.any() or bad_dur.any()):
        return []
    t.ts[bad_ts] = np.nan
    t.dur[bad_ts | bad_dur] = np.nan
    parts = []
    if bad_ts.any():
        parts.append(f"{int(bad_ts.sum()):,} with a timestamp beyond 2^53 µs")
    if bad_dur.any():
        parts.append(f"{int(bad_dur.sum()):,} lasting more than 24 h")
    return [f"events with values no profiler writes were ignored: {', '.join(parts)}"]


def recover_streams(t: EventTable) -> list[str]:
    """Kernels, copies and memsets without a numeric ``args.stream`` go on one stream of their own.

    HTA reads them as CPU events (stream -1) and drops them from every device statistic; a trace
    whose stream field was mangled would then look like one with no GPU work at all.
    """
    lost = t.cat_mask(*IDLE_KERNEL_CATS) & (t.stream == -1) & (t.correlation >= 0)
    if not lost.any():
        return []
    stream = int(t.stream.max()) + 1 if t.stream.size else 0
    t.stream[lost] = max(stream, 0)
    return [
        f"{int(lost.sum()):,} kernels/copies/memsets had no numeric args.stream: "
        f"analyzed on a stream of their own ({max(stream, 0)}); HTA would leave them out"
    ]
