"""`gpuwise monitor report`: a `History` (local store or Prometheus) → what the GPUs cost and what was wasted.

Per GPU: busy-time and memory-headroom distributions, idle and lost GPU-hours and their dollars, energy
(NVML's counter; sampled power only where a GPU has no counter, and then said so), throttled time by
reason, KPI compliance, and findings from the one rule engine (`Evidence` with the history fields); per
process and user: `attribution.py`. Every figure is time-weighted by each sample's ``interval_s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.engine import diagnose
from gpuwise.diagnose.evidence import Evidence, GpuHealth, GpuHistory, MemoryUse, Telemetry
from gpuwise.diagnose.finding import Finding
from gpuwise.finops.attribution import NO_PROCESS, Usage, attribute, by_user
from gpuwise.finops.fleet_findings import group
from gpuwise.finops.right_size import right_size
from gpuwise.finops.tally import BUSY_EDGES, HEADROOM_EDGES, Tally, tally
from gpuwise.monitor.energy import interval_energy_j
from gpuwise.monitor.gaps import find_gaps
from gpuwise.monitor.kpi import SLOWING_REASONS, catalog_id
from gpuwise.monitor.series import Gap, GpuSeries, History

TIMELINE_POINTS = 48
BUSY_BINS = tuple(  # (label, lower edge %): the bands of tally.BUSY_EDGES
    zip(
        (
            f"idle < {T.MONITOR_IDLE_BUSY_PCT:g} %",
            f"{T.MONITOR_IDLE_BUSY_PCT:g}–{T.LOW_UTIL_MODERATE_PCT:g} %",
            f"{T.LOW_UTIL_MODERATE_PCT:g}–{T.MONITOR_BUSY_KPI_PCT:g} %",
            f"≥ {T.MONITOR_BUSY_KPI_PCT:g} % (KPI)",
        ),
        BUSY_EDGES,
        strict=True,
    )
)
HEADROOM_BINS = tuple(
    zip(
        (
            f"< {T.MONITOR_HEADROOM_LOW_PCT:g} % (OOM risk)",
            f"{T.MONITOR_HEADROOM_LOW_PCT:g}–{T.MONITOR_HEADROOM_HIGH_PCT:g} % (KPI)",
            f"{T.MONITOR_HEADROOM_HIGH_PCT:g}–{T.FINOPS_OVERSIZED_HEADROOM_PCT:g} %",
            f"> {T.FINOPS_OVERSIZED_HEADROOM_PCT:g} %",
        ),
        HEADROOM_EDGES,
        strict=True,
    )
)


@dataclass(frozen=True)
class Prices:
    """The prices a report uses: $/GPU-hour (None: each GPU's catalog on-demand price), $/kWh and where that
    electricity price came from (shown next to the energy cost).
    """

    usd_per_gpu_hour: float | None  # None: the catalog's on-demand price of each GPU
    usd_per_kwh: float
    kwh_source: str


@dataclass
class GpuFinops:
    """One GPU's window, every figure time-weighted by the samples' ``interval_s``.

    Hours: ``observed`` (the whole window), ``lost`` (the GPU could not be read), ``idle``, ``in_use``.
    Percentages are 0–100; ``busy_hours``/``headroom_hours`` map the ``BUSY_BINS``/``HEADROOM_BINS`` labels
    to hours; memory in bytes; energy in kWh with ``energy_hours`` the hours it covers; money in USD, None
    when no $/GPU-hour is known (``price_source`` says why). ``processes`` is keyed by process (``users``
    maps each to its user); ``timeline_busy_pct`` has ``TIMELINE_POINTS`` points, None where nothing was
    read.
    """

    hostname: str
    gpu_index: int
    uuid: str | None
    name: str
    catalog_id: str | None
    observed_hours: float
    lost_hours: float
    idle_hours: float
    in_use_hours: float  # readable, busy % known and not idle
    busy_mean_pct: float | None
    busy_in_use_pct: float | None
    busy_hours: dict[str, float]
    headroom_hours: dict[str, float]
    memory_peak_bytes: int | None
    memory_total_bytes: int | None
    headroom_at_peak_pct: float | None
    throttle_hours: dict[str, float]
    energy_kwh: float | None
    energy_hours: float  # hours the energy figure covers
    energy_source: str
    energy_usd: float | None
    usd_per_gpu_hour: float | None
    price_source: str
    usd: float | None
    idle_usd: float | None
    lost_usd: float | None
    kpi_pct: dict[str, float | None]  # KPI -> share of the hours it held
    timeline_busy_pct: list[float | None]
    processes: dict[str, Usage]
    users: dict[str, str | None]
    findings: list[Finding] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    # stretches no sample stands for (monitor/gaps.py): all of them, the part counted in observed_hours
    # (the energy counter ran on: the GPU stayed up and billed), and the energy across them (kWh)
    gap_hours: float = 0.0
    gap_estimated_hours: float = 0.0
    gap_energy_kwh: float | None = None
    gaps: list[Gap] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``hostname:gpu_index``, the GPU's name in fleet findings and tables."""
        return f"{self.hostname}:{self.gpu_index}"

    def to_dict(self) -> dict[str, Any]:
        """The GPU as JSON; processes become a list with their user, findings their dicts."""
        skip = ("processes", "users", "findings", "gaps")
        out = {k: v for k, v in self.__dict__.items() if k not in skip}
        out["gaps"] = [
            {
                "start_unix_s": g.start_unix_s,
                "end_unix_s": g.end_unix_s,
                "duration_s": g.duration_s,
                "energy_span_s": g.energy_span_s,
                "energy_kwh": None if g.energy_j is None else g.energy_j / 3.6e6,
                "gpu_hours": "estimated" if g.held else "unknown",
            }
            for g in self.gaps
        ]
        out["processes"] = [
            {"process": k, "user": self.users.get(k), **u.to_dict()} for k, u in self.processes.items()
        ]
        out["findings"] = [f.to_dict() for f in self.findings]
        return out


@dataclass
class FinopsReport:
    """The ``gpuwise monitor report`` result: the window (Unix s), the prices, every GPU, the users' sums and
    the findings grouped across the GPUs.
    """

    start_unix_s: float
    end_unix_s: float
    origin: str
    notes: list[str]
    prices: Prices
    gpus: list[GpuFinops]
    users: dict[str, Usage]
    findings: list[Finding]  # one per id across the GPUs (fleet_findings.group), most important first

    def total(self, name: str) -> float | None:
        """The sum of one ``GpuFinops`` field over the GPUs that have it; None when none has."""
        values = [getattr(g, name) for g in self.gpus if getattr(g, name) is not None]
        return sum(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (the ``gpuwise monitor report --json`` schema), with fleet totals."""
        totals = ["observed_hours", "idle_hours", "lost_hours", "usd", "idle_usd", "lost_usd"]
        totals += ["energy_kwh", "energy_usd"]
        return {
            "start_unix_s": self.start_unix_s,
            "end_unix_s": self.end_unix_s,
            "origin": self.origin,
            "notes": self.notes,
            "usd_per_gpu_hour": self.prices.usd_per_gpu_hour,
            "usd_per_kwh": self.prices.usd_per_kwh,
            "usd_per_kwh_source": self.prices.kwh_source,
            "totals": {name: self.total(name) for name in totals},
            "gpus": [g.to_dict() for g in self.gpus],
            "users": [{"user": k, **u.to_dict()} for k, u in self.users.items()],
            "findings": [f.to_dict() for f in self.findings],
        }


def _price(name: str, prices: Prices) -> tuple[str | None, float | None, str]:
    gpu_id = catalog_id(name)
    if prices.usd_per_gpu_hour is not None:
        return gpu_id, prices.usd_per_gpu_hour, "--usd-per-gpu-hour"
    if gpu_id is None:
        return None, None, "no catalog match for this GPU (pass --usd-per-gpu-hour)"
    from gpuwise.catalog.prices import price

    listed = price(gpu_id, "on_demand")
    if listed is None:
        return gpu_id, None, f"no catalog price for {gpu_id} (pass --usd-per-gpu-hour)"
    return gpu_id, listed.usd_per_gpu, f"catalog on-demand ({listed.provider}, {listed.as_of})"


def _energy(
    series: GpuSeries, deltas: list[float | None], gaps: list[Gap]
) -> tuple[float | None, float, str]:
    """kWh, the hours it covers and its source: counter deltas, plus the counter's rise across each gap."""
    joules = seconds = 0.0
    for sample, delta in zip(series.samples, deltas, strict=True):
        if delta is not None:
            joules += delta
            seconds += sample.interval_s
    for gap in gaps:
        if gap.energy_j is not None:
            joules += gap.energy_j
            seconds += gap.energy_span_s
    if seconds:
        source = series.sources.get("energy_j") or "NVML total-energy counter deltas"
        return joules / 3.6e6, seconds / 3600, source
    powered = [s for s in series.samples if s.power_w is not None and not s.lost]
    if not powered:
        return None, 0.0, "n/a: no energy counter and no power readings"
    kwh = sum((s.power_w or 0.0) * s.interval_s for s in powered) / 3.6e6
    hours = sum(s.interval_s for s in powered) / 3600
    return kwh, hours, "sampled power × time (this GPU has no energy counter)"


def _timeline(series: GpuSeries, start: float, end: float) -> list[float | None]:
    width = (end - start) / TIMELINE_POINTS
    sums = [[0.0, 0.0] for _ in range(TIMELINE_POINTS)]
    for s in series.samples:
        if s.busy_pct is None or s.lost or width <= 0:
            continue
        i = min(TIMELINE_POINTS - 1, max(0, int((s.time_unix_s - start) / width)))
        sums[i][0] += s.busy_pct * s.interval_s
        sums[i][1] += s.interval_s
    return [a / w if w else None for a, w in sums]


def analyze_gpu(series: GpuSeries, history: History, prices: Prices) -> GpuFinops:
    """One GPU's figures, price, energy, process attribution and findings from its history."""
    t = tally(series.samples)
    deltas = interval_energy_j(series.samples)
    gaps = series.gaps if series.gaps is not None else find_gaps(series.samples)
    kwh, energy_h, energy_source = _energy(series, deltas, gaps)
    held_h = sum(g.duration_s for g in gaps if g.held) / 3600
    t.observed_h += held_h  # billed: the GPU stayed up; busy/idle over it unknown (readable KPI says so)
    gpu_id, usd_h, price_source = _price(series.name, prices)
    processes, users = attribute(series, deltas, t.idle)
    for usage in processes.values():
        usage.priced(usd_h)
    total, peak = t.memory_total_bytes, t.memory_peak_bytes
    gpu = GpuFinops(
        hostname=series.hostname,
        gpu_index=series.gpu_index,
        uuid=series.uuid,
        name=series.name,
        catalog_id=gpu_id,
        observed_hours=t.observed_h,
        lost_hours=t.lost_h,
        idle_hours=t.idle_h,
        in_use_hours=t.in_use_h,
        busy_mean_pct=t.busy_mean(),
        busy_in_use_pct=t.busy_in_use(),
        busy_hours={label: h for (label, _), h in zip(BUSY_BINS, t.busy_bands_h, strict=True)},
        headroom_hours={label: h for (label, _), h in zip(HEADROOM_BINS, t.headroom_bands_h, strict=True)},
        memory_peak_bytes=peak,
        memory_total_bytes=total,
        headroom_at_peak_pct=None if not total or peak is None else 100 * (1 - peak / total),
        throttle_hours=dict(sorted(t.throttle_h.items(), key=lambda kv: -kv[1])),
        energy_kwh=kwh,
        energy_hours=energy_h,
        energy_source=energy_source,
        energy_usd=None if kwh is None else kwh * prices.usd_per_kwh,
        usd_per_gpu_hour=usd_h,
        price_source=price_source,
        usd=None if usd_h is None else t.observed_h * usd_h,
        idle_usd=None if usd_h is None else t.idle_h * usd_h,
        lost_usd=None if usd_h is None else t.lost_h * usd_h,
        kpi_pct={
            "busy_at_kpi_while_in_use": _pct(t.at_kpi_h, t.in_use_h),
            "not_idle": _pct(t.busy_known_h - t.idle_h, t.busy_known_h),
            "headroom_in_band": _pct(t.headroom_in_band_h, t.memory_known_h) if total else None,
            "not_throttled": _pct(t.read_h - t.slowed_h, t.read_h),
            "readable": _pct(t.read_h, t.observed_h),
        },
        timeline_busy_pct=_timeline(series, history.start_unix_s, history.end_unix_s),
        processes=processes,
        users=users,
        sources=dict(series.sources),
        gap_hours=sum(g.duration_s for g in gaps) / 3600,
        gap_estimated_hours=held_h,
        gap_energy_kwh=sum(g.energy_j for g in gaps if g.energy_j is not None) / 3.6e6 if gaps else None,
        gaps=gaps,
    )
    gpu.findings = diagnose(_evidence(gpu, t))
    return gpu


def _idle_holders(g: GpuFinops) -> list[dict[str, Any]]:
    """The processes present while the GPU idled, most idle hours first (memory_idle_held's "who")."""
    rows = [
        {
            "process": key,
            "user": g.users.get(key),
            "memory_bytes": u.memory_max_bytes,
            "idle_gpu_hours": round(u.idle_gpu_hours, 4),
            "idle_usd": None if u.idle_usd is None else round(u.idle_usd, 2),
        }
        for key, u in g.processes.items()
        if key != NO_PROCESS and u.idle_gpu_hours > 0
    ]
    return sorted(rows, key=lambda row: -row["idle_gpu_hours"])


def _pct(part: float, whole: float) -> float | None:
    return None if whole <= 0 else 100 * part / whole


def _evidence(g: GpuFinops, t: Tally) -> Evidence:
    slowing = {k: h for k, h in g.throttle_hours.items() if k in SLOWING_REASONS}
    throttle = {k: 100 * h / t.read_h for k, h in slowing.items()} if t.read_h else {}
    return Evidence(
        source="telemetry",
        health=GpuHealth(lost_gpu_hours=g.lost_hours or None, lost_usd=g.lost_usd if g.lost_hours else None),
        label=f"{g.label} history",
        device="cuda",
        gpu=g.catalog_id or g.name,
        memory=MemoryUse(memory_capacity_bytes=g.memory_total_bytes, memory_peak_bytes=g.memory_peak_bytes),
        telemetry=Telemetry(
            throttle_pct=throttle,
            temperature_c_max=t.temperature_max_c,
            power_w_mean=t.power_sum / t.power_s if t.power_s else None,
        ),
        history=GpuHistory(
            observed_gpu_hours=g.observed_hours,
            idle_time_pct=_pct(g.idle_hours, g.observed_hours),
            idle_usd=g.idle_usd,
            busy_in_use_pct=g.busy_in_use_pct,
            smaller_gpu=right_size(
                g.catalog_id, g.usd_per_gpu_hour, g.memory_peak_bytes, g.busy_in_use_pct, g.in_use_hours
            ),
            memory_peak_in_use_bytes=t.memory_peak_in_use_bytes,
            idle_memory_held_bytes=t.idle_held_max_bytes,
            idle_memory_held_hours=t.idle_held_h,
            idle_memory_held_usd=None if g.usd_per_gpu_hour is None else t.idle_held_h * g.usd_per_gpu_hour,
            usd_per_gpu_hour=g.usd_per_gpu_hour,
            idle_memory_holders=_idle_holders(g),
        ),
    )


GAP_NOTES = 5  # gaps described one by one in the notes; the rest are counted


def gap_notes(gpus: list[GpuFinops], recorder: bool) -> list[str]:
    """One line per gap across the GPUs (the recorder stops for all of them at once), longest first:
    'recorder down 21.6 s (from …); energy over the gap from the counter: … kWh; GPU-hours over the gap
    estimated: …'."""
    spans: dict[tuple[float, float], list[Gap]] = {}
    for g in gpus:
        for gap in g.gaps:
            spans.setdefault((round(gap.start_unix_s, 1), round(gap.end_unix_s, 1)), []).append(gap)
    ordered = sorted(spans.items(), key=lambda kv: -(kv[0][1] - kv[0][0]))
    what = "recorder down" if recorder else "no samples"
    lines = []
    for (start, _), found in ordered[:GAP_NOTES]:
        seconds = max(gap.duration_s for gap in found)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start))
        known = [gap.energy_j for gap in found if gap.energy_j is not None]
        energy = f"{sum(known) / 3.6e6:.6f} kWh" if known else "unknown (no counter reading on both sides)"
        held = sum(gap.duration_s for gap in found if gap.held) / 3600
        hours = f"estimated {held:.4f} (energy counter ran on: the GPUs stayed up and billed)"
        if len(known) < len(found):
            hours += f"; unknown for {len(found) - len(known)} GPU(s) without a continuous counter"
        lines.append(
            f"{what} {seconds:.1f} s from {when} UTC on {len(found)} GPU(s); energy over the gap from the "
            f"counter: {energy}; GPU-hours over the gap {hours if known else 'unknown (not counted)'}"
        )
    if len(ordered) > GAP_NOTES:
        lines.append(f"and {len(ordered) - GAP_NOTES} more gaps (every GPU's under gaps in --json)")
    return lines


def analyze(history: History, prices: Prices) -> FinopsReport:
    """The whole report: every GPU with samples, the users summed across GPUs, the findings grouped."""
    gpus = [analyze_gpu(s, history, prices) for s in history.gpus if s.samples]
    users: dict[str, Usage] = {}
    for g in gpus:
        for name, usage in by_user(g.processes, g.users).items():
            users.setdefault(name, Usage()).add(usage)
    findings = group([(g.label, f) for g in gpus for f in g.findings], len(gpus))
    return FinopsReport(
        history.start_unix_s,
        history.end_unix_s,
        history.origin,
        list(history.notes) + gap_notes(gpus, history.origin.startswith("local")),
        prices,
        gpus,
        users,
        findings,
    )


__all__ = ["FinopsReport", "GpuFinops", "Prices", "analyze"]
