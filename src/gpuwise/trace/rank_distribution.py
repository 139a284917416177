"""Many ranks at a glance: the step time's distribution over ranks and the ranks that stand out, and why.

Beyond `RANKS_LISTED` ranks the report shows this instead of a row per rank: a histogram of the mean step
time per rank, the slowest and fastest ranks, and the outlier ranks with the per-rank figure that sets each
apart (data wait, exposed communication, idle share...). Outliers are told by the modified z-score of
Iglewicz and Hoaglin (1993, "How to Detect and Handle Outliers", ASQC vol. 16): |0.6745 (x - median) / MAD|
above 3.5, robust to the outliers themselves (a mean and standard deviation are dragged by them). Built
from the ranks' summaries only (`RankAnalysis`, no event), like the cross-rank comparison.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuwise.diagnose import thresholds as T
from gpuwise.trace.rank import RankAnalysis

__all__ = [
    "HISTOGRAM_BINS",
    "MODIFIED_Z_OUTLIER",
    "RANKS_LISTED",
    "Outlier",
    "RankDistribution",
    "modified_z",
    "rank_distribution",
]

RANKS_LISTED = 32  # up to this many ranks the report keeps one row per rank
HISTOGRAM_BINS = 12
MODIFIED_Z_OUTLIER = T.RANK_MODIFIED_Z_OUTLIER  # Iglewicz & Hoaglin (1993), diagnose/thresholds.py
_EXTREMES = 5  # slowest and fastest ranks listed
_OUTLIERS_LISTED = 20  # outliers named one by one; the rest counted

# What may set a rank apart: label, unit, value of one rank (None when the trace lacks it).
_METRICS: list[tuple[str, str, Callable[[RankAnalysis], float | None]]] = [
    ("data wait", "%", lambda r: r.steps.input_wait_pct),
    ("exposed communication", "%", lambda r: r.comm.exposed_pct),
    ("communication per step", "ms", lambda r: r.comm.ms_per_step),
    ("idle", "%", lambda r: r.temporal.idle_pct if r.temporal else None),
    ("compute", "%", lambda r: r.temporal.compute_pct if r.temporal else None),
    ("host sync wait", "%", lambda r: r.sync.wait_pct),
]


@dataclass
class Outlier:
    """A rank whose mean step time (ms) stands out (modified z-score), and the figures that set it apart."""

    rank: int
    step_ms: float
    z: float
    why: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"rank": self.rank, "step_ms": round(self.step_ms, 4), "z": round(self.z, 2), "why": self.why}


@dataclass
class RankDistribution:
    """Mean step time per rank (ms): count, quantiles, a histogram, the slowest and fastest ranks, and
    the outliers (with why); None-valued when fewer than two ranks have steps."""

    ranks: int  # ranks with a mean step time
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    histogram: list[tuple[float, float, int]] = field(default_factory=list)  # (from ms, to ms, ranks)
    slowest: list[tuple[int, float]] = field(default_factory=list)  # (rank, ms), slowest first
    fastest: list[tuple[int, float]] = field(default_factory=list)  # (rank, ms), fastest first
    outliers: list[Outlier] = field(default_factory=list)
    outlier_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the ``rank_distribution`` object of the trace document)."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "ranks": self.ranks,
            "step_median_ms": r(self.median_ms),
            "step_p10_ms": r(self.p10_ms),
            "step_p90_ms": r(self.p90_ms),
            "histogram": [{"from_ms": r(a), "to_ms": r(b), "ranks": n} for a, b, n in self.histogram],
            "slowest": [{"rank": k, "step_ms": r(v)} for k, v in self.slowest],
            "fastest": [{"rank": k, "step_ms": r(v)} for k, v in self.fastest],
            "outliers": [o.to_dict() for o in self.outliers],
            "outlier_count": self.outlier_count,
        }


def modified_z(values: list[float]) -> Callable[[float], float]:
    """x -> 0.6745 (x - median) / MAD over ``values``; with MAD 0 (most values equal), the mean absolute
    deviation times 1.2533 stands in (Iglewicz & Hoaglin); 0 for every x when all values are equal."""
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    if mad > 0:
        return lambda x: 0.6745 * (x - median) / mad
    mean_ad = statistics.fmean(abs(v - median) for v in values)
    if mean_ad > 0:
        return lambda x: (x - median) / (1.2533 * mean_ad)
    return lambda x: 0.0


def rank_distribution(ranks: list[RankAnalysis]) -> RankDistribution:
    """The distribution of mean step time over the ranked analyses (first file of each rank)."""
    first: dict[int, RankAnalysis] = {}
    for a in ranks:
        if a.rank.rank is not None and a.steps.mean_ms is not None:
            first.setdefault(a.rank.rank, a)
    steps = {rank: a.steps.mean_ms for rank, a in first.items() if a.steps.mean_ms is not None}
    if len(steps) < 2:
        return RankDistribution(len(steps))
    values = sorted(steps.values())
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    ordered = sorted(steps.items(), key=lambda kv: (kv[1], kv[0]))
    z_of = modified_z(values)
    flagged = sorted(
        ((rank, ms, z_of(ms)) for rank, ms in steps.items() if abs(z_of(ms)) > MODIFIED_Z_OUTLIER),
        key=lambda t: -abs(t[2]),
    )
    why = _why_of(list(first.values())) if flagged else None
    outliers = [Outlier(rank, ms, z, why(first[rank]) if why else []) for rank, ms, z in flagged]
    return RankDistribution(
        len(steps),
        statistics.median(values),
        deciles[0],
        deciles[-1],
        _histogram(values),
        [(k, v) for k, v in reversed(ordered[-_EXTREMES:])],
        ordered[:_EXTREMES],
        outliers[:_OUTLIERS_LISTED],
        len(outliers),
    )


def _histogram(values: list[float]) -> list[tuple[float, float, int]]:
    """Equal-width bins from the smallest to the largest value (one bin when all are equal)."""
    low, high = values[0], values[-1]
    if high <= low:
        return [(low, high, len(values))]
    width = (high - low) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for v in values:
        counts[min(HISTOGRAM_BINS - 1, int((v - low) / width))] += 1
    return [(low + i * width, low + (i + 1) * width, n) for i, n in enumerate(counts)]


def _why_of(everyone: list[RankAnalysis]) -> Callable[[RankAnalysis], list[str]]:
    """rank -> the per-rank figures in which it is itself an outlier, largest first, as
    'data wait 31.0 % (median 7.2 %)' (empty when none is); medians and MADs computed once."""
    scales = []
    for label, unit, read in _METRICS:
        values = [v for v in (read(a) for a in everyone) if v is not None]
        if len(values) >= 3:
            scales.append(
                (label, " " + unit if unit else "", read, modified_z(values), statistics.median(values))
            )

    def why(rank: RankAnalysis) -> list[str]:
        found: list[tuple[float, str]] = []
        for label, unit, read, z_of, median in scales:
            mine = read(rank)
            if mine is not None and abs(z := z_of(mine)) > MODIFIED_Z_OUTLIER:
                found.append((abs(z), f"{label} {mine:,.1f}{unit} (median {median:,.1f}{unit})"))
        return [text for _, text in sorted(found, key=lambda t: -t[0])]

    return why
