"""`gpuwise monitor report` as a Document: what the GPUs cost, what was wasted, by whom, and what to do.

Every number says where it came from (the Sources list): busy % is NVML utilization.gpu (time a kernel
ran, not SM occupancy), energy the NVML counter unless a GPU has none.
"""

from __future__ import annotations

import time

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.finding import SEVERITIES
from gpuwise.finops.analyze import BUSY_BINS, HEADROOM_BINS, FinopsReport, GpuFinops
from gpuwise.finops.attribution import Usage
from gpuwise.finops.fleet_findings import named
from gpuwise.monitor.kpi import SLOWING_REASONS
from gpuwise.report.document import Bullets, Chart, Document, Heading, KeyFigures, Note, Series, Table
from gpuwise.report.findings import findings_blocks
from gpuwise.report.units import gib, usd

NA = "n/a"
MAX_PROCESS_ROWS = 20
# A fleet of hundreds of GPUs: the per-GPU tables show the ones that cost most in waste (--json has all).
MAX_GPU_ROWS = 24
HIGH = SEVERITIES.index("high")  # GPUs with a finding this severe or worse are highlighted
MAX_LINES = 8  # GPUs drawn one line each in the timeline (the palette's colours)
KPI_NAMES = {
    "busy_at_kpi_while_in_use": "busy ≥ KPI in use",
    "not_idle": "not idle",
    "headroom_in_band": "headroom in band",
    "not_throttled": "not throttled",
    "readable": "readable",
}


def _h(hours: float | None) -> str:
    return NA if hours is None else f"{hours:,.1f}"


def _pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f} %"


def _kwh(value: float | None) -> str:
    return NA if value is None else f"{value:,.2f}"


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _share(hours: float, whole: float) -> str:
    return f"{hours:,.1f} ({100 * hours / whole:.0f} %)" if whole > 0 else _h(hours)


def _num(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}"


def _gpu_row(g: GpuFinops, model: bool, lost: bool) -> list[str]:
    head = (
        NA
        if g.memory_peak_bytes is None
        else f"{gib(g.memory_peak_bytes, 1)} ({_pct(g.headroom_at_peak_pct)})"
    )
    return [
        g.label,
        *([g.name.removeprefix("NVIDIA ")] if model else []),
        _h(g.observed_hours),
        _num(g.busy_mean_pct),
        _num(g.busy_in_use_pct),
        f"{_h(g.idle_hours)} ({usd(g.idle_usd)})",
        *([_h(g.lost_hours)] if lost else []),
        f"{_kwh(g.energy_kwh)} ({usd(g.energy_usd)})",
        head,
        usd(g.usd),
    ]


def _usage_row(name: str, u: Usage) -> list[str]:
    return [
        name,
        _h(u.gpu_hours),
        _h(u.busy_gpu_hours),
        _h(u.idle_gpu_hours),
        usd(u.idle_usd),
        _kwh(u.energy_kwh),
        usd(u.usd),
    ]


def _figures(r: FinopsReport) -> KeyFigures:
    idle, lost = r.total("idle_hours") or 0.0, r.total("lost_hours") or 0.0
    items = [
        ("GPUs", str(len(r.gpus))),
        ("GPU-hours", _h(r.total("observed_hours"))),
        ("spent", usd(r.total("usd"))),
        ("idle GPU-hours", f"{idle:,.1f} ({usd(r.total('idle_usd'))})"),
        ("energy", f"{_kwh(r.total('energy_kwh'))} kWh ({usd(r.total('energy_usd'))})"),
        ("findings", str(len(r.findings))),
    ]
    if lost:
        items.insert(4, ("lost GPU-hours", f"{lost:,.1f} ({usd(r.total('lost_usd'))})"))
    prices = {g.price_source for g in r.gpus}
    energy = f"energy ${r.prices.usd_per_kwh:.3f}/kWh ({r.prices.kwh_source})"
    caption = f"GPU price: {'; '.join(sorted(prices))} · {energy}"
    return KeyFigures(items, caption=caption)


def _time_labels(start: float, step: float, points: int) -> list[str]:
    """Each slice's end; over two days only the first slice of each day is labelled (one tick a day)."""
    ends = [start + (i + 1) * step for i in range(points)]
    if step * points <= 2 * 86400:
        return [time.strftime("%H:%M", time.localtime(t)) for t in ends]
    days = [time.strftime("%b %d", time.localtime(t)) for t in ends]
    return [d if i and d != days[i - 1] else "" for i, d in enumerate(days)]


def _timeline_series(gpus: list[GpuFinops]) -> list[Series]:
    """A line per GPU up to MAX_LINES; beyond, the fleet's mean, least and most busy per slice."""
    nan = float("nan")
    if len(gpus) <= MAX_LINES:
        return [Series(g.label, [nan if v is None else v for v in g.timeline_busy_pct]) for g in gpus]
    by_slice = zip(*(g.timeline_busy_pct for g in gpus), strict=True)
    slices = [[v for v in values if v is not None] for values in by_slice]
    return [
        Series(f"mean of {len(gpus)} GPUs", [sum(v) / len(v) if v else nan for v in slices]),
        Series("least busy GPU", [min(v) if v else nan for v in slices]),
        Series("most busy GPU", [max(v) if v else nan for v in slices]),
    ]


def _charts(r: FinopsReport) -> list[Chart]:
    shown, _ = _shown_gpus(r)
    labels = [g.label for g in shown]
    busy = Chart(
        "stacked",
        "Busy-time distribution (GPU-hours)",
        labels,
        # busiest band first: the palette then draws the idle band last, in red (waste), the KPI band in blue
        [Series(name, [g.busy_hours[name] for g in shown]) for name, _ in reversed(BUSY_BINS)],
        x_label="GPU-hours",
        y_label="GPU",
        horizontal=True,
        description="Hours each GPU spent in each busy-% band; the idle band is the cost of waste.",
        in_text=False,
    )
    points = len(r.gpus[0].timeline_busy_pct) if r.gpus else 0
    step = (r.end_unix_s - r.start_unix_s) / max(points, 1)
    timeline = Chart(
        "line",
        "Busy % over the window",
        _time_labels(r.start_unix_s, step, points),
        _timeline_series(r.gpus),
        y_label="busy %",
        description="Mean busy % of each GPU per slice of the window (gaps: not recorded)"
        + (f"; {len(r.gpus)} GPUs: their mean, least and most busy" if len(r.gpus) > MAX_LINES else "")
        + ".",
        in_text=False,
    )
    users = sorted(((k, u) for k, u in r.users.items() if u.idle_usd), key=lambda kv: -(kv[1].idle_usd or 0))
    idle = Chart(
        "bar",
        "Idle $ by user",
        [name if name != "no process" else "no process (held idle)" for name, _ in users],
        [Series("idle $", [u.idle_usd or 0.0 for _, u in users])],
        x_label="idle $",
        y_label="user",
        horizontal=True,
        description="What each user's idle-held GPU time cost (attribution rule in docs/monitoring.md).",
        in_text=False,
    )
    return [busy, timeline, idle] if users else [busy, timeline]


def _energy_sources(gpus: list[GpuFinops]) -> list[str]:
    """One line per energy source, not per GPU: 500 GPUs on the same counter make one line."""
    by_source: dict[str, list[GpuFinops]] = {}
    for g in gpus:
        by_source.setdefault(g.energy_source, []).append(g)
    lines = []
    for source, group in by_source.items():
        names = f"all {len(gpus)} GPUs" if len(group) == len(gpus) > 1 else named([g.label for g in group])
        covered = sum(g.energy_hours for g in group)
        lines.append(f"energy — {names}: {source} ({covered:,.1f} GPU-h covered)")
    return lines


def _shown_gpus(r: FinopsReport) -> tuple[list[GpuFinops], str]:
    """Every GPU for a host or a rack; for a fleet, the MAX_GPU_ROWS with the most idle $ (then idle
    hours, then flagged) and a caption saying how many were left out."""
    if len(r.gpus) <= MAX_GPU_ROWS:
        return r.gpus, ""
    ranked = sorted(
        r.gpus,
        key=lambda g: (
            -(g.idle_usd or 0.0),
            -g.idle_hours,
            min((f.severity_rank for f in g.findings), default=9),
        ),
    )
    return ranked[:MAX_GPU_ROWS], (
        f" — the {MAX_GPU_ROWS} of {len(r.gpus)} GPUs with the most idle $ (--json lists every GPU)"
    )


def document(r: FinopsReport) -> Document:
    """The monitor report: key figures, per-GPU tables, usage by user and process, charts, findings,
    and where every number came from."""
    doc = Document(
        f"gpuwise monitor report — {_when(r.start_unix_s)} to {_when(r.end_unix_s)}",
        subtitle=f"{r.origin} · busy % = time a kernel ran (NVML utilization.gpu), not SM occupancy",
    )
    doc.add(_figures(r))
    gpus, cut = _shown_gpus(r)
    doc.add(_gpu_table(r, gpus, cut))
    doc.add(*_distribution_tables(gpus, cut))
    doc.add(*_usage_tables(r))
    doc.add(*_charts(r))
    doc.add(Heading("Findings"))
    doc.add(*findings_blocks(r.findings, measured=True))
    doc.add(Heading("Sources"))
    sources = dict(r.gpus[0].sources) if r.gpus else {}
    sources.pop("energy_j", None)
    doc.add(Bullets([f"{k}: {v}" for k, v in sources.items()] + _energy_sources(r.gpus)))
    for note in r.notes:
        doc.add(Note(note))
    return doc


def _gpu_table(r: FinopsReport, gpus: list[GpuFinops], cut: str) -> Table:
    """One row per shown GPU: hours, busy %, idle hours and $, energy, peak memory, spend; GPUs with a
    high or critical finding highlighted. `cut` says when only the costliest GPUs are shown."""
    models = sorted({g.name for g in r.gpus})
    mixed, lost = len(models) > 1, any(g.lost_hours for g in r.gpus)
    columns = ["GPU", *(["model"] if mixed else []), "GPU-h", "busy %", "busy % in use", "idle GPU-h ($)"]
    columns += [*(["lost GPU-h"] if lost else []), "kWh ($)", "peak GiB", "spent"]
    return Table(
        columns,
        [_gpu_row(g, mixed, lost) for g in gpus],
        caption=(f"{len(r.gpus)} × {models[0]}. " if len(models) == 1 else "")
        + "busy %: mean over every hour held, idle hours included; busy % in use: over the hours not "
        f"idle (busy ≥ {T.MONITOR_IDLE_BUSY_PCT:g} %); peak GiB (share free at the peak)" + cut,
        align="l" + "r" * (len(columns) - 1),
        row_styles=["warn" if any(f.severity_rank <= HIGH for f in g.findings) else "" for g in gpus],
        flexible=1 if mixed else 0,
    )


def _distribution_tables(gpus: list[GpuFinops], cut: str) -> list[Table]:
    """Per GPU, GPU-hours by busy bin and by memory-headroom bin, throttled hours by reason (only when
    any), and the share of hours each KPI held."""
    tables = [
        Table(
            ["GPU", *[name for name, _ in BUSY_BINS]],
            [[g.label, *[_share(g.busy_hours[n], g.observed_hours) for n, _ in BUSY_BINS]] for g in gpus],
            caption="Busy-time distribution, GPU-hours (share of the window)" + cut,
        ),
        Table(
            ["GPU", *[name for name, _ in HEADROOM_BINS]],
            [
                [g.label, *[_share(g.headroom_hours[n], g.observed_hours) for n, _ in HEADROOM_BINS]]
                for g in gpus
            ],
            caption="Memory headroom distribution, GPU-hours" + cut,
        ),
    ]
    throttled = [
        [g.label, reason, _share(h, g.observed_hours)]
        for g in gpus
        for reason, h in g.throttle_hours.items()
        if reason in SLOWING_REASONS  # gpu_idle and application clocks are not throttling
    ]
    if throttled:
        tables.append(
            Table(
                ["GPU", "reason", "hours"],
                throttled,
                caption="Throttled time by reason (power, thermal, hardware slowdown)" + cut,
            )
        )
    tables.append(
        Table(
            ["GPU", *KPI_NAMES.values()],
            [[g.label, *[_pct(g.kpi_pct.get(k)) for k in KPI_NAMES]] for g in gpus],
            caption="KPI compliance: share of the hours each KPI held" + cut,
        )
    )
    return tables


def _usage_tables(r: FinopsReport) -> list[Table]:
    """GPU-hours, idle $, energy and spend by user, then by process (the top `MAX_PROCESS_ROWS`)."""
    usage_cols = ["", "GPU-h", "busy GPU-h", "idle GPU-h", "idle $", "kWh", "spent"]
    users = sorted(r.users.items(), key=lambda kv: -kv[1].gpu_hours)
    by_user = Table(
        ["user", *usage_cols[1:]],
        [_usage_row(name, u) for name, u in users],
        caption="By user (a GPU's hours split among its processes by SM share, else memory)",
    )
    procs = sorted(
        ((g.label, key, g.users.get(key), u) for g in r.gpus for key, u in g.processes.items()),
        key=lambda row: -row[3].gpu_hours,
    )
    by_process = Table(
        ["GPU", "process", "user", *usage_cols[1:]],
        [
            [label, *_usage_row(key, u)[:1], user or NA, *_usage_row(key, u)[1:]]
            for label, key, user, u in procs
        ][:MAX_PROCESS_ROWS],
        caption="By process"
        + (f" (top {MAX_PROCESS_ROWS} of {len(procs)})" if len(procs) > MAX_PROCESS_ROWS else ""),
    )
    return [by_user, by_process]


__all__ = ["document"]
