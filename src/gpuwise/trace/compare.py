"""`gpuwise trace --compare A B`: what changed between two traces (or two sets of per-rank traces).

Each side is summarized per step (mean over its ranks), so traces with different step counts
compare; kernels are matched by name. Metrics say which direction is better.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuwise.diagnose import thresholds as T
from gpuwise.trace.analyze import TraceReport
from gpuwise.trace.rank import RankAnalysis

__all__ = ["Change", "Side", "TraceComparison", "compare_reports", "mismatches", "side_label", "summarize"]


@dataclass
class Side:
    """One side (A or B) of a comparison: each metric's mean over its ranks, kernel time per
    category and per kernel name (ms per step and rank), findings, devices and rank count."""

    label: str
    files: list[str]
    metrics: dict[str, float | None]
    categories_ms: dict[str, float]  # kernel category -> ms per step
    kernels_ms: dict[str, float]  # full kernel name -> ms per step (every kernel of every rank)
    findings: list[str]
    per_step: bool  # False when a side has no ProfilerStep: figures are per trace instead
    devices: list[str] = field(default_factory=list)  # distinct GPU names (catalog id, else as reported)
    num_ranks: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (per-kernel times are left out: the comparison lists the top changes)."""
        return {
            "label": self.label,
            "files": self.files,
            "per_step": self.per_step,
            "metrics": {k: (None if v is None else round(v, 4)) for k, v in self.metrics.items()},
            "categories_ms": {k: round(v, 4) for k, v in self.categories_ms.items()},
            "findings": self.findings,
            "devices": self.devices,
            "num_ranks": self.num_ranks,
        }


@dataclass
class Change:
    """One metric, kernel category or kernel in A and in B, in `unit` ("pp": percentage
    points of a share), and whether a lower value is better (None: neither)."""

    name: str
    unit: str
    a: float | None
    b: float | None
    lower_is_better: bool | None

    @property
    def delta(self) -> float | None:
        """B - A in the metric's unit; None when either side lacks it."""
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def delta_pct(self) -> float | None:
        """B - A as % of |A|; None when A is missing or zero."""
        return None if self.delta is None or not self.a else 100.0 * self.delta / abs(self.a)

    @property
    def verdict(self) -> str:
        """By the metric's direction, "better" or "worse"; "same" under 2 % (0.5 pp for shares);
        "" when it has no direction or a side is missing."""
        d = self.delta
        if d is None or self.lower_is_better is None or abs(d) < 1e-9:
            return ""
        relative = abs(self.delta_pct) if self.delta_pct is not None else 100.0
        if relative < 2.0 and self.unit != "pp":
            return "same"
        if self.unit == "pp" and abs(d) < 0.5:
            return "same"
        return "better" if (d < 0) == self.lower_is_better else "worse"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: values, delta and delta % (4 decimals) and the verdict."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "name": self.name,
            "unit": self.unit,
            "a": r(self.a),
            "b": r(self.b),
            "delta": r(self.delta),
            "delta_pct": r(self.delta_pct),
            "verdict": self.verdict,
        }


@dataclass
class TraceComparison:
    """B against A: metric, kernel-category and top-kernel changes, findings new in B or gone
    from it, and why the two may not be the same job (`mismatches`)."""

    a: Side
    b: Side
    metrics: list[Change]
    categories: list[Change]
    kernels: list[Change]
    findings_added: list[str]
    findings_removed: list[str]
    notes: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)  # why A and B are not the same job ([] if they are)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document's body for `gpuwise trace --compare` (docs/json-schema.md)."""
        return {
            "comparable": not self.mismatches,
            "mismatches": self.mismatches,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "metrics": [c.to_dict() for c in self.metrics],
            "categories": [c.to_dict() for c in self.categories],
            "kernels": [c.to_dict() for c in self.kernels],
            "findings_added": self.findings_added,
            "findings_removed": self.findings_removed,
            "notes": self.notes,
        }


# name, unit, lower is better (None: neither)
_METRICS = [
    ("step_time_ms", "ms", True),
    ("idle_pct", "pp", True),
    ("compute_pct", "pp", False),
    ("non_compute_pct", "pp", True),
    ("input_wait_pct", "pp", True),
    ("sync_wait_pct", "pp", True),
    ("sync_calls_per_step", "", True),
    ("kernels_per_step", "", True),
    ("tiny_kernel_pct", "pp", True),
    ("launch_delay_median_us", "µs", None),
    ("h2d_copy_pct", "pp", True),
    ("pageable_copy_pct", "pp", True),
    ("comm_exposed_pct", "pp", True),
    ("comm_overlap_pct", "pp", False),
    ("peak_reserved_gib", "GiB", True),
]


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def _temporal(r: RankAnalysis, share: str) -> float | None:
    """A temporal-breakdown share (% of the device span), None when the rank has no GPU activity."""
    return getattr(r.temporal, share) if r.temporal else None


def _peak_reserved_gib(r: RankAnalysis) -> float | None:
    """Peak reserved memory in GiB, None when the trace has no memory events (or a zero peak)."""
    return r.memory.peak_reserved_bytes / 2**30 if r.memory and r.memory.peak_reserved_bytes else None


# How each metric of `_METRICS` is read from one rank (a side's value is the mean over its ranks).
_RANK_METRIC: dict[str, Callable[[RankAnalysis], float | None]] = {
    "step_time_ms": lambda r: r.steps.mean_ms,
    "idle_pct": lambda r: _temporal(r, "idle_pct"),
    "compute_pct": lambda r: _temporal(r, "compute_pct"),
    "non_compute_pct": lambda r: _temporal(r, "non_compute_pct"),
    "input_wait_pct": lambda r: r.steps.input_wait_pct,
    "sync_wait_pct": lambda r: r.sync.wait_pct,
    "sync_calls_per_step": lambda r: r.sync.calls_per_step,
    "kernels_per_step": lambda r: r.launches.kernels_per_step,
    "tiny_kernel_pct": lambda r: r.kernels.tiny_kernel_pct,
    "launch_delay_median_us": lambda r: r.launches.launch_delay_median_us,
    "h2d_copy_pct": lambda r: r.copies.h2d_copy_pct,
    "pageable_copy_pct": lambda r: r.copies.pageable_copy_pct,
    "comm_exposed_pct": lambda r: r.comm.exposed_pct,
    "comm_overlap_pct": lambda r: r.comm.overlap_pct,
    "peak_reserved_gib": _peak_reserved_gib,
}


def summarize(report: TraceReport, label: str) -> Side:
    """One side of a comparison: each metric's mean over the ranks, kernel time per category and per
    kernel name (ms per step and rank; per trace when a rank has no ProfilerStep), findings, devices."""
    ranks = report.ranks
    per_step = all(r.steps_in_window > 0 for r in ranks)
    metrics = {name: _mean([read(r) for r in ranks]) for name, read in _RANK_METRIC.items()}
    categories, kernels = _kernel_ms(ranks, per_step)
    devices = sorted({r.device.catalog_id or r.device.name or r.device.kind for r in ranks})
    return Side(
        label,
        [r.file for r in ranks],
        metrics,
        categories,
        kernels,
        [f.id for f in report.findings],
        per_step,
        devices,
        len(ranks),
    )


def _kernel_ms(ranks: list[RankAnalysis], per_step: bool) -> tuple[dict[str, float], dict[str, float]]:
    """(kernel category -> ms, kernel name -> ms), per step (if `per_step`) and averaged over ranks."""
    categories: dict[str, float] = {}
    kernels: dict[str, float] = {}
    for r in ranks:
        scale = 1.0 / 1000 / (r.steps_in_window if per_step else 1) / len(ranks)
        for name, row in r.kernels.categories.items():
            categories[name] = categories.get(name, 0.0) + row["time_us"] * scale
        for name, time_us in r.kernels.by_name_us.items():
            kernels[name] = kernels.get(name, 0.0) + time_us * scale
    return categories, kernels


def _shared_time_pct(a: dict[str, float], b: dict[str, float]) -> float:
    """Share of the kernel time spent in kernels both sides ran (by full name), the smaller side's view."""
    shared = set(a) & set(b)
    return 100.0 * min(
        sum(a[n] for n in shared) / (sum(a.values()) or 1), sum(b[n] for n in shared) / (sum(b.values()) or 1)
    )


def mismatches(a: Side, b: Side) -> list[str]:
    """Why the two sides are not the same job: then a finding that disappears is not 'resolved'."""
    out = []
    if a.devices != b.devices:
        out.append(f"the devices differ ({', '.join(a.devices)} vs {', '.join(b.devices)})")
    if a.num_ranks != b.num_ranks:
        out.append(f"the rank counts differ ({a.num_ranks} vs {b.num_ranks})")
    if a.kernels_ms and b.kernels_ms:
        shared = _shared_time_pct(a.kernels_ms, b.kernels_ms)
        if shared < T.COMPARABLE_SHARED_KERNEL_PCT:
            out.append(
                f"only {shared:.0f} % of the kernel time is in kernels both ran (different workloads?)"
            )
    return out


def compare_reports(
    a: TraceReport, b: TraceReport, label_a: str, label_b: str, top_n: int = 12
) -> TraceComparison:
    """What changed from trace A to trace B: every metric either side has, every kernel
    category (largest first), the `top_n` kernels whose time changed most, findings added and
    resolved. A finding gone from B is not called resolved when A and B are not the same job."""
    side_a, side_b = summarize(a, label_a), summarize(b, label_b)
    notes = []
    if side_a.per_step != side_b.per_step:
        notes.append(
            "one side has no ProfilerStep annotations: "
            "kernel times are per trace, not per step, and differ in scope"
        )
    unit = "ms/step" if side_a.per_step and side_b.per_step else "ms"
    metrics = [
        Change(name, u, side_a.metrics[name], side_b.metrics[name], better)
        for name, u, better in _METRICS
        if side_a.metrics[name] is not None or side_b.metrics[name] is not None
    ]
    categories = [
        Change(c, unit, side_a.categories_ms.get(c, 0.0), side_b.categories_ms.get(c, 0.0), True)
        for c in sorted(
            set(side_a.categories_ms) | set(side_b.categories_ms),
            key=lambda c: -max(side_a.categories_ms.get(c, 0.0), side_b.categories_ms.get(c, 0.0)),
        )
    ]
    names = set(side_a.kernels_ms) | set(side_b.kernels_ms)
    ranked = sorted(names, key=lambda n: -abs(side_b.kernels_ms.get(n, 0.0) - side_a.kernels_ms.get(n, 0.0)))[
        :top_n
    ]
    kernels = [Change(n, unit, side_a.kernels_ms.get(n), side_b.kernels_ms.get(n), True) for n in ranked]
    added = [f for f in side_b.findings if f not in side_a.findings]
    removed = [f for f in side_a.findings if f not in side_b.findings]
    differ = mismatches(side_a, side_b)
    if differ:
        notes.append(
            "A and B are not the same job: " + "; ".join(differ) + ". Differences are shown, "
            "but findings only in A are not called resolved"
            + (f" (only in A: {', '.join(removed)})" if removed else "")
        )
        removed = []
    return TraceComparison(side_a, side_b, metrics, categories, kernels, added, removed, notes, differ)


def side_label(paths: list[str | Path]) -> str:
    """A side's label: its file names, comma-separated."""
    return ", ".join(Path(p).name for p in paths)
