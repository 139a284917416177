"""`gpuwise monitor report`: a `History` (local store or Prometheus) → what the GPUs cost and what was wasted.

Per GPU: busy-time and memory-headroom distributions, idle and lost GPU-hours and their dollars, energy
(NVML's counter; sampled power only where a GPU has no counter, and then said so), throttled time by
reason, KPI compliance, and findings from the one rule engine (`Evidence` with the history fields); per
process and user: `attribution.py`. Every figure is time-weighted by each sample's ``interval_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.engine import diagnose
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding
from gpuwise.monitor.attribution import Usage, attribute, by_user
from gpuwise.monitor.energy import interval_energy_j
from gpuwise.monitor.kpi import SLOWING_REASONS, catalog_id
from gpuwise.monitor.right_size import smaller_gpu
from gpuwise.monitor.series import GpuSample, GpuSeries, History

TIMELINE_POINTS = 48
BUSY_BINS = (  # label, lower edge (%), from the monitor KPIs
    (f"idle < {T.MONITOR_IDLE_BUSY_PCT:g} %", 0.0),
    (f"{T.MONITOR_IDLE_BUSY_PCT:g}–{T.LOW_UTIL_MODERATE_PCT:g} %", T.MONITOR_IDLE_BUSY_PCT),
    (f"{T.LOW_UTIL_MODERATE_PCT:g}–{T.MONITOR_BUSY_KPI_PCT:g} %", T.LOW_UTIL_MODERATE_PCT),
    (f"≥ {T.MONITOR_BUSY_KPI_PCT:g} % (KPI)", T.MONITOR_BUSY_KPI_PCT),
)
HEADROOM_BINS = (
    (f"< {T.MONITOR_HEADROOM_LOW_PCT:g} % (OOM risk)", -1e9),
    (f"{T.MONITOR_HEADROOM_LOW_PCT:g}–{T.MONITOR_HEADROOM_HIGH_PCT:g} % (KPI)", T.MONITOR_HEADROOM_LOW_PCT),
    (f"{T.MONITOR_HEADROOM_HIGH_PCT:g}–{T.FINOPS_OVERSIZED_HEADROOM_PCT:g} %", T.MONITOR_HEADROOM_HIGH_PCT),
    (f"> {T.FINOPS_OVERSIZED_HEADROOM_PCT:g} %", T.FINOPS_OVERSIZED_HEADROOM_PCT),
)


@dataclass(frozen=True)
class Prices:
    usd_per_gpu_hour: float | None  # None: the catalog's on-demand price of each GPU
    usd_per_kwh: float
    kwh_source: str


@dataclass
class GpuFinops:
    hostname: str
    gpu_index: int
    uuid: str | None
    name: str
    catalog_id: str | None
    observed_hours: float
    lost_hours: float
    idle_hours: float
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

    @property
    def label(self) -> str:
        return f"{self.hostname}:{self.gpu_index}"

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("processes", "users", "findings")}
        out["processes"] = [
            {"process": k, "user": self.users.get(k), **u.to_dict()} for k, u in self.processes.items()
        ]
        out["findings"] = [f.to_dict() for f in self.findings]
        return out


@dataclass
class FinopsReport:
    start_unix_s: float
    end_unix_s: float
    origin: str
    notes: list[str]
    prices: Prices
    gpus: list[GpuFinops]
    users: dict[str, Usage]
    findings: list[tuple[str, Finding]]  # (GPU label, finding), most severe first

    def total(self, name: str) -> float | None:
        values = [getattr(g, name) for g in self.gpus if getattr(g, name) is not None]
        return sum(values) if values else None

    def to_dict(self) -> dict[str, Any]:
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
            "findings": [{"gpu": label, **f.to_dict()} for label, f in self.findings],
        }


def _bin(value: float, bins: tuple[tuple[str, float], ...]) -> str:
    label = bins[0][0]
    for name, lower in bins:
        if value >= lower:
            label = name
    return label


def _hours(s: GpuSample) -> float:
    return s.interval_s / 3600


def _slowed_s(s: GpuSample) -> float:
    """Seconds of the interval some slowing reason was active (reasons overlap: the longest one)."""
    return min(s.interval_s, max((v for k, v in s.throttle_s.items() if k in SLOWING_REASONS), default=0.0))


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


def _energy(series: GpuSeries, deltas: list[float | None]) -> tuple[float | None, float, str]:
    known = [(s, d) for s, d in zip(series.samples, deltas, strict=True) if d is not None]
    if known:
        source = series.sources.get("energy_j") or "NVML total-energy counter deltas"
        return sum(d for _, d in known) / 3.6e6, sum(_hours(s) for s, _ in known), source
    powered = [s for s in series.samples if s.power_w is not None and not s.lost]
    if not powered:
        return None, 0.0, "n/a: no energy counter and no power readings"
    kwh = sum((s.power_w or 0.0) * s.interval_s for s in powered) / 3.6e6
    return kwh, sum(_hours(s) for s in powered), "sampled power × time (this GPU has no energy counter)"


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
    samples = series.samples
    readable = [s for s in samples if not s.lost]
    lost_h = sum(_hours(s) for s in samples if s.lost)
    observed = sum(_hours(s) for s in samples)
    busy_known = [s for s in readable if s.busy_pct is not None]
    idle_flags = [
        not s.lost and s.busy_pct is not None and s.busy_pct < T.MONITOR_IDLE_BUSY_PCT for s in samples
    ]
    idle_h = sum(_hours(s) for s, idle in zip(samples, idle_flags, strict=True) if idle)
    busy_h = {label: 0.0 for label, _ in BUSY_BINS}
    for s in busy_known:
        busy_h[_bin(s.busy_pct or 0.0, BUSY_BINS)] += _hours(s)
    known_h = sum(_hours(s) for s in busy_known)
    in_use = [s for s in busy_known if (s.busy_pct or 0.0) >= T.MONITOR_IDLE_BUSY_PCT]
    in_use_h = sum(_hours(s) for s in in_use)
    total = next((s.memory_total_bytes for s in readable if s.memory_total_bytes), None)
    used = [s for s in readable if s.memory_used_bytes is not None]
    peak = max((s.memory_used_bytes or 0 for s in used), default=None)
    head_h = {label: 0.0 for label, _ in HEADROOM_BINS}
    in_band = 0.0
    if total:
        for s in used:
            headroom = 100 * (1 - (s.memory_used_bytes or 0) / total)
            head_h[_bin(headroom, HEADROOM_BINS)] += _hours(s)
            in_band += (
                _hours(s) if T.MONITOR_HEADROOM_LOW_PCT <= headroom <= T.MONITOR_HEADROOM_HIGH_PCT else 0
            )
    throttle: dict[str, float] = {}
    for s in readable:
        for reason, seconds in s.throttle_s.items():
            throttle[reason] = throttle.get(reason, 0.0) + seconds / 3600
    read_h = sum(_hours(s) for s in readable)
    slowed_h = sum(_slowed_s(s) for s in readable) / 3600
    deltas = interval_energy_j(samples)
    kwh, energy_h, energy_source = _energy(series, deltas)
    gpu_id, usd_h, price_source = _price(series.name, prices)
    busy_at_kpi = sum(_hours(s) for s in in_use if (s.busy_pct or 0) >= T.MONITOR_BUSY_KPI_PCT)
    processes, users = attribute(series, deltas, idle_flags)
    for usage in processes.values():
        usage.priced(usd_h)
    gpu = GpuFinops(
        hostname=series.hostname,
        gpu_index=series.gpu_index,
        uuid=series.uuid,
        name=series.name,
        catalog_id=gpu_id,
        observed_hours=observed,
        lost_hours=lost_h,
        idle_hours=idle_h,
        busy_mean_pct=_mean_busy(busy_known),
        busy_in_use_pct=_mean_busy(in_use),
        busy_hours=busy_h,
        headroom_hours=head_h,
        memory_peak_bytes=peak,
        memory_total_bytes=total,
        headroom_at_peak_pct=None if not total or peak is None else 100 * (1 - peak / total),
        throttle_hours=dict(sorted(throttle.items(), key=lambda kv: -kv[1])),
        energy_kwh=kwh,
        energy_hours=energy_h,
        energy_source=energy_source,
        energy_usd=None if kwh is None else kwh * prices.usd_per_kwh,
        usd_per_gpu_hour=usd_h,
        price_source=price_source,
        usd=None if usd_h is None else observed * usd_h,
        idle_usd=None if usd_h is None else idle_h * usd_h,
        lost_usd=None if usd_h is None else lost_h * usd_h,
        kpi_pct={
            "busy_at_kpi_while_in_use": _pct(busy_at_kpi, in_use_h),
            "not_idle": _pct(known_h - idle_h, known_h),
            "headroom_in_band": _pct(in_band, sum(_hours(s) for s in used)) if total else None,
            "not_throttled": _pct(read_h - slowed_h, read_h),
            "readable": _pct(read_h, observed),
        },
        timeline_busy_pct=_timeline(series, history.start_unix_s, history.end_unix_s),
        processes=processes,
        users=users,
        sources=dict(series.sources),
    )
    gpu.findings = diagnose(_evidence(gpu, readable))
    return gpu


def _mean_busy(samples: list[GpuSample]) -> float | None:
    weight = sum(s.interval_s for s in samples)
    return None if not weight else sum((s.busy_pct or 0.0) * s.interval_s for s in samples) / weight


def _pct(part: float, whole: float) -> float | None:
    return None if whole <= 0 else 100 * part / whole


def _evidence(g: GpuFinops, readable: list[GpuSample]) -> Evidence:
    read_h = sum(_hours(s) for s in readable)
    temps = [s.temperature_c for s in readable if s.temperature_c is not None]
    powered = [s for s in readable if s.power_w is not None]
    power = sum((s.power_w or 0) * s.interval_s for s in powered) / max(
        sum(s.interval_s for s in powered), 1e-9
    )
    return Evidence(
        source="telemetry",
        label=f"{g.label} history",
        device="cuda",
        gpu=g.catalog_id or g.name,
        memory_capacity_bytes=g.memory_total_bytes,
        memory_peak_bytes=g.memory_peak_bytes,
        throttle_pct={
            k: 100 * h / read_h for k, h in g.throttle_hours.items() if k in SLOWING_REASONS and read_h
        },
        temperature_c_max=max(temps) if temps else None,
        power_w_mean=power if powered else None,
        observed_gpu_hours=g.observed_hours,
        idle_time_pct=_pct(g.idle_hours, g.observed_hours),
        idle_usd=g.idle_usd,
        busy_in_use_pct=g.busy_in_use_pct,
        smaller_gpu=smaller_gpu(g.catalog_id, g.usd_per_gpu_hour, g.memory_peak_bytes, g.observed_hours),
    )


def analyze(history: History, prices: Prices) -> FinopsReport:
    gpus = [analyze_gpu(s, history, prices) for s in history.gpus if s.samples]
    users: dict[str, Usage] = {}
    for g in gpus:
        for name, usage in by_user(g.processes, g.users).items():
            users.setdefault(name, Usage()).add(usage)
    findings = sorted(((g.label, f) for g in gpus for f in g.findings), key=lambda lf: lf[1].severity_rank)
    return FinopsReport(
        history.start_unix_s,
        history.end_unix_s,
        history.origin,
        list(history.notes),
        prices,
        gpus,
        users,
        findings,
    )


__all__ = ["FinopsReport", "GpuFinops", "Prices", "analyze"]
