"""Reports of `gpuwise trace`: breakdown per rank and stream, kernels, host side, ranks, findings, compare."""

from __future__ import annotations

from gpuwise.report.chart_text import bar
from gpuwise.report.document import (
    Block,
    Bullets,
    Chart,
    Document,
    Heading,
    Note,
    Paragraph,
    Series,
    Style,
    Table,
)
from gpuwise.report.findings import findings_blocks
from gpuwise.report.trace_ranks_view import distribution_blocks
from gpuwise.report.units import decimal_size as _size
from gpuwise.report.units import num as _n
from gpuwise.trace.analyze import TraceReport
from gpuwise.trace.compare import Change, TraceComparison
from gpuwise.trace.cross_rank import CrossRank, compact_ranges
from gpuwise.trace.kernel_names import distinct_short_names
from gpuwise.trace.rank import RankAnalysis
from gpuwise.trace.rank_distribution import RANKS_LISTED
from gpuwise.units import GiB

__all__ = [
    "breakdown_chart",
    "comparison_document",
    "host_table",
    "idle_blocks",
    "kernel_blocks",
    "rank_blocks",
    "ranks_blocks",
    "report_document",
]

_PARTS = ("compute", "non-compute", "idle")
_RANKS_CHARTED = 128  # one bar per rank up to this many (a 128-rank job is one chart)


def _header(r: RankAnalysis) -> list[Block]:
    dev = r.device
    device = dev.name or dev.kind.upper()
    if dev.catalog_id and dev.catalog_id != dev.name:
        device += f" (catalog: {dev.catalog_id})"
    rank = (
        "no rank info"
        if r.rank.rank is None
        else f"rank {r.rank.rank}" + (f" of {r.rank.world_size}" if r.rank.world_size else "")
    )
    speed = r.json_bytes / 1e6 / r.parse_s if r.parse_s > 0 else 0
    return [
        Heading(f"{rank} · {device}", 2),
        Note(
            f"{r.file} · {r.events:,} events · {_size(r.json_bytes)} JSON · parsed in {r.parse_s:.2f} s "
            f"({speed:,.0f} MB/s)"
        ),
    ]


def breakdown_chart(r: RankAnalysis) -> Block:
    """One stacked bar: compute | non-compute | idle, as shares of the device span."""
    t = r.temporal
    if t is None:
        return Note("no GPU activity in this trace")
    parts = [("compute", t.compute_pct), ("non-compute", t.non_compute_pct), ("idle", t.idle_pct)]
    return Chart(
        "stacked",
        f"Temporal breakdown over {t.span_us / 1000:,.1f} ms of device time"
        + (" (last ProfilerStep left out, as HTA does)" if r.dropped_last_step else ""),
        [r.label],
        [Series(f"{name} {pct:.2f} %", [pct]) for name, pct in parts],
        x_label="share of the device span (%)",
        horizontal=True,
        description=", ".join(f"{name} {pct:.2f} %" for name, pct in parts) + " of the device span.",
    )


def kernel_blocks(r: RankAnalysis, top: int) -> list[Block]:
    """Kernel time by category and the `top` kernels (names shortened yet distinct), with a chart."""
    k = r.kernels
    categories = sorted(k.categories.items(), key=lambda kv: -kv[1]["time_us"])
    listed = r.kernels.top[:top]
    names = distinct_short_names([x.name for x in listed], 60)
    return [
        Table(
            ["category", "count", "time", "share", ""],
            [
                [
                    name,
                    f"{int(row['count']):,}",
                    f"{row['time_us'] / 1000:,.1f} ms",
                    f"{row['pct']:.1f} %",
                    bar(row["pct"], 100, 24),
                ]
                for name, row in categories
            ],
            caption=f"Device time by kernel category ({k.count:,} kernels)",
            align="lrrrl",
        ),
        Table(
            ["kernel", "category", "calls", "total", "mean", "share"],
            [
                [
                    name,
                    kern.category,
                    f"{kern.count:,}",
                    f"{kern.time_us / 1000:,.2f} ms",
                    f"{kern.mean_us:,.1f} µs",
                    f"{kern.pct:.1f} %",
                ]
                for kern, name in zip(listed, names, strict=True)
            ],
            caption=f"Top {len(listed)} kernels by device time",
            align="llrrrr",
            flexible=0,
        ),
        Chart(
            "bar",
            f"Top {len(listed)} kernels by device time",
            names,
            [Series("ms", [kern.time_us / 1000 for kern in listed])],
            x_label="device time (ms)",
            y_label="kernel",
            horizontal=True,
            description="The kernels that took the most device time: "
            + ", ".join(
                f"{n} {kern.time_us / 1000:,.2f} ms" for n, kern in zip(names[:3], listed, strict=False)
            )
            + ".",
            in_text=False,
        ),
    ]


def host_table(r: RankAnalysis) -> Table:
    """The host side and data movement of one rank: steps, data wait, syncs, launches, copies,
    communication, memory; values past a finding's threshold styled."""
    s, sync, launch, copies, comm = r.steps, r.sync, r.launches, r.copies, r.comm
    rows: list[list[str]] = []
    styles: list[Style] = []

    def row(key: str, value: str, style: Style = "") -> None:
        rows.append([key, value])
        styles.append(style)

    if s.count:
        row("steps", f"{s.count} (ProfilerStep#{s.numbers[0]}–#{s.numbers[-1]})")
        row(
            "step time",
            f"mean {_n(s.mean_ms, '{:,.1f}')} ms · median {_n(s.median_ms, '{:,.1f}')} · "
            f"p90 {_n(s.p90_ms, '{:,.1f}')} · min {_n(s.min_ms, '{:,.1f}')} · "
            f"max {_n(s.max_ms, '{:,.1f}')} ms",
        )
    else:
        row("steps", "no ProfilerStep#N annotations", "muted")
    if s.input_wait_pct is not None:
        row(
            "waiting for data",
            f"{s.input_wait_pct:.1f} % of step time ({_n(s.loader_ms_per_step, '{:,.1f}')} ms/step in "
            f"DataLoader.__next__, {s.loader_kind} loader)",
            "bad" if s.input_wait_pct >= 20 else "warn" if s.input_wait_pct >= 5 else "good",
        )
    row(
        "synchronizing calls",
        f"{sync.calls:,} ({_n(sync.calls_per_step, '{:,.1f}')} per step), {sync.time_ms:,.2f} ms"
        + (f", {sync.wait_pct:.2f} % of step time" if sync.wait_pct is not None else ""),
    )
    row(
        "kernel launches",
        f"{launch.kernels:,} kernels ({_n(launch.kernels_per_step)} per step) · "
        f"{_n(r.kernels.tiny_kernel_pct, '{:,.1f}')} % under 10 µs · "
        f"launch→start median {_n(launch.launch_delay_median_us)} µs, "
        f"p90 {_n(launch.launch_delay_p90_us)} µs",
    )
    for direction, c in sorted(copies.directions.items()):
        pageable = f", {int(c['pageable_count'])} pageable" if c["pageable_count"] else ""
        row(
            f"memcpy {direction}",
            f"{int(c['count']):,} copies, {_size(c['bytes'])}, {c['time_us'] / 1000:,.2f} ms{pageable}",
        )
    if comm.kernels:
        row(
            "communication",
            f"{comm.kernels:,} kernels, {comm.time_us / 1000:,.1f} ms · overlapped by compute "
            f"{_n(comm.overlap_pct, '{:,.1f}')} % · exposed {_n(comm.exposed_pct, '{:,.1f}')} % of the span",
        )
    if r.kernels.fp32_matmul_pct is not None:
        row(
            "matmul precision",
            ", ".join(
                f"{k} {v / 1000:,.1f} ms"
                for k, v in sorted(r.kernels.precision_us.items(), key=lambda kv: -kv[1])
            ),
        )
    if r.memory:
        m = r.memory
        if m.peak_reserved_bytes is not None:
            row(
                "device memory",
                f"peak reserved {m.peak_reserved_bytes / GiB:,.2f} GiB, allocated "
                f"{_n((m.peak_allocated_bytes or 0) / GiB, '{:,.2f}')} GiB"
                + (f" of {r.device.memory_bytes / GiB:,.1f} GiB" if r.device.memory_bytes else ""),
            )
        elif m.window_growth_peak_bytes is not None:
            row(
                "device memory",
                f"+{m.window_growth_peak_bytes / GiB:,.2f} GiB allocated within the trace "
                "(absolute peak not recorded by this trace format)",
            )
    return Table(["", ""], rows, caption="Steps, input, host and copies", row_styles=styles, header=False)


def idle_blocks(r: RankAnalysis) -> list[Block]:
    """Idle time of the 8 idlest streams split into host wait, kernel wait and other (HTA's idle
    breakdown); nothing when no stream idles."""
    streams = sorted((s for s in r.idle_by_stream if s.idle_us > 0), key=lambda s: -s.idle_us)[:8]
    if not streams:
        return []
    kinds = ("host_wait", "kernel_wait", "other")
    return [
        Table(
            ["stream", "kernels", "idle", "host wait", "kernel wait", "other"],
            [
                [
                    str(s.stream),
                    f"{s.kernels:,}",
                    f"{s.idle_us / 1000:,.1f} ms",
                    *[f"{(s.ratio(c) or 0) * 100:.0f} %" for c in kinds],
                ]
                for s in streams
            ],
            caption="Idle time per stream (HTA categories)",
            align="lrrrrr",
        ),
        Chart(
            "stacked",
            "Idle time per stream, by cause",
            [f"stream {s.stream}" for s in streams],
            [
                Series(c.replace("_", " "), [(s.ratio(c) or 0) * s.idle_us / 1000 for s in streams])
                for c in kinds
            ],
            x_label="idle time (ms)",
            y_label="stream",
            horizontal=True,
            description="Each stream's idle time split into waiting for the host, for another kernel, "
            "and other gaps.",
            in_text=False,
        ),
    ]


def rank_blocks(r: RankAnalysis, top: int) -> list[Block]:
    """Everything about one rank: header, temporal breakdown, kernels, idle, host side, warnings."""
    blocks = [*_header(r), breakdown_chart(r)]
    if r.kernels.categories:
        blocks += kernel_blocks(r, top)
    blocks += idle_blocks(r)
    blocks.append(host_table(r))
    blocks += [Note(f"warning: {w}", "warn") for w in r.warnings]
    return blocks


def ranks_blocks(report: TraceReport) -> list[Block]:
    """A multi-rank run: one table row per rank (the slowest flagged), a breakdown and a step-time
    chart per rank, and what differs across ranks (skew, communication spread, missing ranks)."""
    if len(report.ranks) > RANKS_LISTED:  # distributions, not a row per rank (report/trace_ranks_view.py)
        lines = _cross_rank_lines(report.cross_rank)
        return distribution_blocks(report, _rank_row) + ([Bullets(lines)] if lines else [])
    slow = report.cross_rank.slowest_rank
    rows = [_rank_row(r) for r in report.ranks]
    styles = ["bad" if slow is not None and r.rank.rank == slow else "" for r in report.ranks]
    blocks: list[Block] = [
        Heading("Ranks", 2),
        Table(
            ["rank", "file", "step", "idle", "compute", "non-compute", "data wait", "comm exposed"],
            rows,
            align="llrrrrrr",
            row_styles=styles,  # type: ignore[arg-type]  # built from "" and "bad"
        ),
    ]
    charted = [r for r in report.ranks if r.temporal is not None][:_RANKS_CHARTED]
    if charted:
        blocks += _ranks_charts(charted, slow)
    lines = _cross_rank_lines(report.cross_rank)
    if lines:
        blocks.append(Bullets(lines))
    return blocks


def _rank_row(r: RankAnalysis) -> list[str]:
    """rank, file name, mean step (ms), idle / compute / non-compute / data wait / exposed comm (%)."""
    t = r.temporal
    return [
        "?" if r.rank.rank is None else str(r.rank.rank),
        r.file.split("/")[-1],
        _n(r.steps.mean_ms, "{:,.1f}", " ms"),
        _n(t.idle_pct if t else None, "{:.1f}", " %"),
        _n(t.compute_pct if t else None, "{:.1f}", " %"),
        _n(t.non_compute_pct if t else None, "{:.1f}", " %"),
        _n(r.steps.input_wait_pct, "{:.1f}", " %"),
        _n(r.comm.exposed_pct, "{:.1f}", " %"),
    ]


def _ranks_charts(charted: list[RankAnalysis], slow: int | None) -> list[Block]:
    """Compute / non-compute / idle share per rank; mean step time per rank when 2+ ranks have steps."""
    blocks: list[Block] = [
        Chart(
            "stacked",
            "Temporal breakdown per rank",
            [r.label for r in charted],
            [
                Series("compute", [r.temporal.compute_pct if r.temporal else 0.0 for r in charted]),
                Series("non-compute", [r.temporal.non_compute_pct if r.temporal else 0.0 for r in charted]),
                Series("idle", [r.temporal.idle_pct if r.temporal else 0.0 for r in charted]),
            ],
            x_label="share of the device span (%)",
            y_label="rank",
            horizontal=True,
            description=f"Compute, non-compute and idle share of each of {len(charted)} ranks"
            + (f"; rank {slow} is the slowest." if slow is not None else "."),
            in_text=False,
        )
    ]
    steps = [r for r in charted if r.steps.mean_ms is not None]
    if len(steps) > 1:
        blocks.append(
            Chart(
                "bar",
                "Mean step time per rank",
                [r.label for r in steps],
                [Series("ms", [r.steps.mean_ms or 0.0 for r in steps])],
                x_label="rank",
                y_label="step time (ms)",
                marked=[i for i, r in enumerate(steps) if r.rank.rank == slow],
                mark_label="slowest",
                description="Mean step time of each rank; a straggler stands out.",
                in_text=False,
            )
        )
    return blocks


def _cross_rank_lines(c: CrossRank) -> list[str]:
    """What differs across ranks, one line each: step skew, communication spread, missing and
    duplicate ranks, rank-info notes."""
    lines = []
    if c.step_skew_pct is not None:
        lines.append(f"step time: slowest rank {c.slowest_rank} is {c.step_skew_pct:+.1f} % vs the median")
    if c.comm_skew_pct is not None and c.least_comm_rank is not None:
        most = max(c.comm_ms_per_step, key=c.comm_ms_per_step.__getitem__)
        lines.append(
            f"communication kernels per step: least on rank {c.least_comm_rank} "
            f"({c.comm_ms_per_step[c.least_comm_rank]:,.2f} ms), most on rank {most} "
            f"({c.comm_ms_per_step[most]:,.2f} ms), spread {c.comm_skew_pct:.0f} % "
            "(time in collectives is mostly waiting: "
            "the rank that waits least is the one the others wait for)"
        )
    if c.missing:
        lines.append(f"missing ranks: {len(c.missing)} of {c.world_size} ({compact_ranges(c.missing)})")
    for rank, files in c.duplicates.items():
        lines.append(f"duplicate rank {rank}: {', '.join(files)}")
    lines += [n for n in c.notes if "carry no rank" in n or "world sizes" in n]
    return lines


def report_document(report: TraceReport, top: int = 10, rank: int | None = None) -> Document:
    """`gpuwise trace`: skipped files, the ranks table for multi-rank runs, details of up to two
    ranks (else the slowest, or `rank`), and the findings."""
    ranks = report.ranks
    doc = Document(
        f"Trace: {len(ranks)} rank{'s' if len(ranks) != 1 else ''}"
        + (f" · {ranks[0].file}" if len(ranks) == 1 else "")
    )
    if report.skipped:
        total = len(ranks) + len(report.skipped)
        doc.add(
            Paragraph(f"Skipped {len(report.skipped)} of {total} files (the rest are analyzed):", "warn"),
            Bullets([f"{s.file}: {s.reason}" for s in report.skipped]),
        )
    if len(ranks) > 1:
        doc.add(*ranks_blocks(report))
    if rank is not None:
        chosen = [r for r in ranks if r.rank.rank == rank]
    elif len(ranks) <= 2:
        chosen = ranks
    else:
        slow = report.cross_rank.slowest_rank
        chosen = [next((r for r in ranks if r.rank.rank == slow), ranks[0])]
        doc.add(Note(f"Details of {chosen[0].label} (the slowest); `--rank N` shows another."))
    for r in chosen:
        doc.add(*rank_blocks(r, top))
    doc.add(Heading("Findings", 2), *findings_blocks(report.findings))
    return doc


def _delta(change) -> tuple[str, Style]:
    if change.a is None and change.b is not None:
        return "only in B", ""
    if change.b is None and change.a is not None:
        return "only in A", ""
    if change.delta is None:
        return "—", "muted"
    unit = " pp" if change.unit == "pp" else ""
    text = f"{change.delta:+,.2f}{unit}" + (
        f" ({change.delta_pct:+.0f} %)" if change.delta_pct is not None and change.unit != "pp" else ""
    )
    style: Style = {"better": "good", "worse": "bad", "same": "muted"}.get(change.verdict, "")  # type: ignore[assignment]  # values are Styles
    return text, style


_METRIC_LABEL = {
    "step_time_ms": "step time",
    "idle_pct": "GPU idle",
    "compute_pct": "compute",
    "non_compute_pct": "non-compute",
    "input_wait_pct": "waiting for data",
    "sync_wait_pct": "in sync calls",
    "sync_calls_per_step": "sync calls per step",
    "kernels_per_step": "kernels per step",
    "tiny_kernel_pct": "kernels under 10 µs",
    "launch_delay_median_us": "launch→start (median)",
    "h2d_copy_pct": "host→device copies",
    "pageable_copy_pct": "pageable H2D bytes",
    "comm_exposed_pct": "exposed communication",
    "comm_overlap_pct": "communication overlapped",
    "peak_reserved_gib": "peak reserved memory",
}
_BREAKDOWN = ("compute_pct", "non_compute_pct", "idle_pct", "input_wait_pct")


def _change_table(title: str, rows, names: list[str], label: dict[str, str] | None = None) -> Table:
    cells, styles = [], []
    for c, name in zip(rows, names, strict=True):
        unit = " %" if c.unit == "pp" else (f" {c.unit}" if c.unit and label else "")
        delta, style = _delta(c)
        cells.append(
            [(label or {}).get(name, name), _n(c.a, "{:,.2f}", unit), _n(c.b, "{:,.2f}", unit), delta]
        )
        styles.append(style)
    return Table(
        ["metric" if label else "name", "A", "B", "change"],
        cells,
        caption=title,
        align="lrrr",
        row_styles=styles,
        flexible=None if label else 0,
    )


def comparison_document(cmp: TraceComparison, top: int = 10) -> Document:
    """Trace B against trace A: metric changes, the device-time breakdown before and after, kernel
    categories and the `top` kernels that changed most, and findings resolved or new in B."""
    doc = Document("Trace comparison: B against A")
    doc.add(Paragraph(f"A: {cmp.a.label}"), Paragraph(f"B: {cmp.b.label}"))
    doc.add(_change_table("What changed (B vs A)", cmp.metrics, [c.name for c in cmp.metrics], _METRIC_LABEL))
    shares = [c for c in cmp.metrics if c.name in _BREAKDOWN]
    if shares:
        doc.add(_shares_chart(shares))
    for title, rows in (
        ("Kernel categories", cmp.categories),
        (f"Kernels that changed most (top {top})", cmp.kernels[:top]),
    ):
        if rows:
            doc.add(*_kernel_change_blocks(title, rows))
    if cmp.findings_removed:
        doc.add(Paragraph("resolved in B: " + ", ".join(cmp.findings_removed), "good"))
    if cmp.findings_added:
        doc.add(Paragraph("new in B: " + ", ".join(cmp.findings_added), "bad"))
    doc.add(*(Note(f"note: {note}", "warn") for note in cmp.notes))
    return doc


def _shares_chart(shares: list[Change]) -> Chart:
    """Grouped bars: each breakdown share (%) of the device span in A and in B."""
    return Chart(
        "grouped",
        "Before and after: where the device time goes",
        [_METRIC_LABEL[c.name] for c in shares],
        [
            Series("A (before)", [c.a or 0.0 for c in shares]),
            Series("B (after)", [c.b or 0.0 for c in shares]),
        ],
        x_label="share (%)",
        horizontal=True,
        description="Shares of the device span in A and in B: "
        + ", ".join(f"{_METRIC_LABEL[c.name]} {c.a or 0:.1f} → {c.b or 0:.1f} %" for c in shares)
        + ".",
    )


def _kernel_change_blocks(title: str, rows: list[Change]) -> list[Block]:
    """A change table and grouped A/B bars for kernel categories or kernels (names shortened to 44)."""
    names = distinct_short_names([c.name for c in rows], 44)
    return [
        _change_table(f"{title} ({rows[0].unit})", rows, names),
        Chart(
            "grouped",
            f"{title}: A and B",
            names,
            [
                Series("A (before)", [c.a or 0.0 for c in rows]),
                Series("B (after)", [c.b or 0.0 for c in rows]),
            ],
            x_label=rows[0].unit,
            horizontal=True,
            description=f"{title} in A and in B ({rows[0].unit}).",
            in_text=False,
        ),
    ]
