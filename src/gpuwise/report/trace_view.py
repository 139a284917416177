"""Terminal views of `gpuwise trace`: breakdown bars, kernel and host tables, ranks, findings, comparisons."""

from __future__ import annotations

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from gpuwise.report.profile_view import findings_group
from gpuwise.trace.compare import TraceComparison
from gpuwise.trace.cross_rank import compact_ranges
from gpuwise.trace.kernel_names import distinct_short_names
from gpuwise.trace.rank import RankAnalysis
from gpuwise.trace.report import TraceReport
from gpuwise.units import GiB

BAR = 48
_PART_STYLE = {"compute": "green", "non-compute": "yellow", "idle": "red"}
_CATEGORY_STYLE = {
    "gemm": "green",
    "convolution": "green",
    "attention": "green",
    "elementwise": "cyan",
    "reduction": "cyan",
    "communication": "magenta",
    "memcpy": "yellow",
    "memset": "yellow",
    "other": "white",
}


def _n(x: float | None, fmt: str = "{:,.1f}", unit: str = "") -> str:
    return "—" if x is None else fmt.format(x) + unit


def _size(n: float) -> str:
    """Decimal units, labelled: 35.2 MB, 1.07 GB."""
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB"


def _bar(pct: float, style: str, width: int = 24) -> Text:
    filled = max(0, min(width, round(pct / 100 * width)))
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


def breakdown_bar(r: RankAnalysis) -> Text:
    """One stacked bar: compute | non-compute | idle, as shares of the device span."""
    t = r.temporal
    if t is None:
        return Text("no GPU activity in this trace", style="dim")
    parts = [("compute", t.compute_pct), ("non-compute", t.non_compute_pct), ("idle", t.idle_pct)]
    widths = [round(p / 100 * BAR) for _, p in parts]
    widths[-1] = max(0, BAR - sum(widths[:-1]))
    bar = Text()
    for (name, _), w in zip(parts, widths, strict=True):
        bar.append("█" * w, style=_PART_STYLE[name])
    legend = Text("  ")
    for name, pct in parts:
        legend.append("■ ", style=_PART_STYLE[name]).append(f"{name} {pct:.2f} %  ")
    return bar + legend


def _header(r: RankAnalysis) -> Text:
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
    return Text.assemble(
        (f"{rank} · ", "bold"),
        (device, "bold"),
        "\n",
        (
            f"{r.file} · {r.events:,} events · {_size(r.json_bytes)} JSON · parsed in {r.parse_s:.2f} s "
            f"({speed:,.0f} MB/s)",
            "dim",
        ),
    )


def kernel_table(r: RankAnalysis, top: int) -> Table:
    k = r.kernels
    table = Table(
        title=f"Device time by kernel category ({k.count:,} kernels)",
        title_justify="left",
        header_style="bold",
    )
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("category", "left"),
        ("count", "right"),
        ("time", "right"),
        ("share", "right"),
        ("", "left"),
    )
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for name, row in sorted(k.categories.items(), key=lambda kv: -kv[1]["time_us"]):
        table.add_row(
            name,
            f"{int(row['count']):,}",
            f"{row['time_us'] / 1000:,.1f} ms",
            f"{row['pct']:.1f} %",
            _bar(row["pct"], _CATEGORY_STYLE.get(name, "white")),
        )
    return table


def top_kernels_table(r: RankAnalysis, top: int) -> Table:
    table = Table(
        title=f"Top {min(top, len(r.kernels.top))} kernels by device time",
        title_justify="left",
        header_style="bold",
    )
    # numbers keep their width and never wrap; the kernel name gives way (ellipsis) on narrow terminals
    widths = {"category": 11, "calls": 5, "total": 9, "mean": 8, "share": 6}
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("kernel", "left"),
        ("category", "left"),
        ("calls", "right"),
        ("total", "right"),
        ("mean", "right"),
        ("share", "right"),
    )
    for col, justify in columns:
        table.add_column(
            col,
            justify=justify,
            overflow="ellipsis",
            no_wrap=col != "kernel",
            max_width=60 if col == "kernel" else None,
            min_width=widths.get(col),
        )
    listed = r.kernels.top[:top]
    for kern, name in zip(listed, distinct_short_names([k.name for k in listed], 60), strict=True):
        table.add_row(
            name,
            kern.category,
            f"{kern.count:,}",
            f"{kern.time_us / 1000:,.2f} ms",
            f"{kern.mean_us:,.1f} µs",
            f"{kern.pct:.1f} %",
        )
    return table


def host_table(r: RankAnalysis) -> Table:
    s, sync, launch, copies, comm = r.steps, r.sync, r.launches, r.copies, r.comm
    table = Table(title="Steps, input, host and copies", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    if s.count:
        table.add_row("steps", f"{s.count} (ProfilerStep#{s.numbers[0]}–#{s.numbers[-1]})")
        table.add_row(
            "step time",
            f"mean {_n(s.mean_ms)} ms · median {_n(s.median_ms)} · p90 {_n(s.p90_ms)} · "
            f"min {_n(s.min_ms)} · max {_n(s.max_ms)} ms",
        )
    else:
        table.add_row("steps", Text("no ProfilerStep#N annotations", style="dim"))
    if s.input_wait_pct is not None:
        style = "red" if s.input_wait_pct >= 20 else "yellow" if s.input_wait_pct >= 5 else "green"
        table.add_row(
            "waiting for data",
            Text(
                f"{s.input_wait_pct:.1f} % of step time ({_n(s.loader_ms_per_step)} ms/step in "
                f"DataLoader.__next__, {s.loader_kind} loader)",
                style=style,
            ),
        )
    table.add_row(
        "synchronizing calls",
        f"{sync.calls:,} ({_n(sync.calls_per_step)} per step), {sync.time_ms:,.2f} ms"
        + (f", {sync.wait_pct:.2f} % of step time" if sync.wait_pct is not None else ""),
    )
    table.add_row(
        "kernel launches",
        f"{launch.kernels:,} kernels ({_n(launch.kernels_per_step, '{:,.0f}')} per step) · "
        f"{_n(r.kernels.tiny_kernel_pct)} % under 10 µs · "
        f"launch→start median {_n(launch.launch_delay_median_us, '{:,.0f}')} µs, "
        f"p90 {_n(launch.launch_delay_p90_us, '{:,.0f}')} µs",
    )
    for direction, row in sorted(copies.directions.items()):
        pageable = f", {int(row['pageable_count'])} pageable" if row["pageable_count"] else ""
        table.add_row(
            f"memcpy {direction}",
            f"{int(row['count']):,} copies, {_size(row['bytes'])}, {row['time_us'] / 1000:,.2f} ms{pageable}",
        )
    if comm.kernels:
        table.add_row(
            "communication",
            f"{comm.kernels:,} kernels, {comm.time_us / 1000:,.1f} ms · overlapped by compute "
            f"{_n(comm.overlap_pct)} % · exposed {_n(comm.exposed_pct)} % of the span",
        )
    if r.kernels.fp32_matmul_pct is not None:
        table.add_row(
            "matmul precision",
            ", ".join(
                f"{k} {v / 1000:,.1f} ms"
                for k, v in sorted(r.kernels.precision_us.items(), key=lambda kv: -kv[1])
            ),
        )
    if r.memory:
        m = r.memory
        if m.peak_reserved_bytes is not None:
            table.add_row(
                "device memory",
                f"peak reserved {m.peak_reserved_bytes / GiB:,.2f} GiB, allocated "
                f"{_n((m.peak_allocated_bytes or 0) / GiB, '{:,.2f}')} GiB"
                + (f" of {r.device.memory_bytes / GiB:,.1f} GiB" if r.device.memory_bytes else ""),
            )
        elif m.window_growth_peak_bytes is not None:
            table.add_row(
                "device memory",
                f"+{m.window_growth_peak_bytes / GiB:,.2f} GiB allocated within the trace "
                "(absolute peak not recorded by this trace format)",
            )
    return table


def idle_table(r: RankAnalysis) -> Table | None:
    streams = [s for s in r.idle_by_stream if s.idle_us > 0]
    if not streams:
        return None
    table = Table(title="Idle time per stream (HTA categories)", title_justify="left", header_style="bold")
    for col in ("stream", "kernels", "idle", "host wait", "kernel wait", "other"):
        table.add_column(col, justify="left" if col == "stream" else "right")
    for s in sorted(streams, key=lambda s: -s.idle_us)[:8]:
        table.add_row(
            str(s.stream),
            f"{s.kernels:,}",
            f"{s.idle_us / 1000:,.1f} ms",
            *[f"{(s.ratio(c) or 0) * 100:.0f} %" for c in ("host_wait", "kernel_wait", "other")],
        )
    return table


def render_rank(console: Console, r: RankAnalysis, top: int) -> None:
    console.print(_header(r))
    if r.temporal:
        t = r.temporal
        console.print(
            Text(
                f"Temporal breakdown over {t.span_us / 1000:,.1f} ms of device time"
                + (" (last ProfilerStep left out, as HTA does)" if r.dropped_last_step else ""),
                style="bold",
            )
        )
    console.print(breakdown_bar(r))
    if r.kernels.categories:
        console.print(kernel_table(r, top))
        console.print(top_kernels_table(r, top))
    idle = idle_table(r)
    if idle is not None:
        console.print(idle)
    console.print(host_table(r))
    for warning in r.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"))


def ranks_table(report: TraceReport) -> Table:
    table = Table(title="Ranks", title_justify="left", header_style="bold")
    for col in ("rank", "file", "step", "idle", "compute", "non-compute", "data wait", "comm exposed"):
        table.add_column(col, justify="left" if col in {"rank", "file"} else "right")
    slow = report.cross_rank.slowest_rank
    for r in report.ranks:
        t = r.temporal
        table.add_row(
            "?" if r.rank.rank is None else str(r.rank.rank),
            r.file.split("/")[-1],
            _n(r.steps.mean_ms, "{:,.1f}", " ms"),
            _n(t.idle_pct if t else None, "{:.1f}", " %"),
            _n(t.compute_pct if t else None, "{:.1f}", " %"),
            _n(t.non_compute_pct if t else None, "{:.1f}", " %"),
            _n(r.steps.input_wait_pct, "{:.1f}", " %"),
            _n(r.comm.exposed_pct, "{:.1f}", " %"),
            style="bold red" if slow is not None and r.rank.rank == slow else "",
        )
    return table


def render_cross_rank(console: Console, report: TraceReport) -> None:
    c = report.cross_rank
    console.print(ranks_table(report))
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
    for line in lines + [n for n in c.notes if "carry no rank" in n or "world sizes" in n]:
        console.print(Text("• " + line))


def render_skipped(console: Console, report: TraceReport) -> None:
    total = len(report.ranks) + len(report.skipped)
    console.print(
        Text(f"Skipped {len(report.skipped)} of {total} files (the rest are analyzed):", style="yellow")
    )
    for s in report.skipped:
        console.print(Text(f"• {s.file}: {s.reason}"))
    console.print()


def render_report(console: Console, report: TraceReport, top: int = 10, rank: int | None = None) -> None:
    ranks = report.ranks
    if report.skipped:
        render_skipped(console, report)
    if len(ranks) > 1:
        render_cross_rank(console, report)
        console.print()
    if rank is not None:
        chosen = [r for r in ranks if r.rank.rank == rank]
    elif len(ranks) <= 2:
        chosen = ranks
    else:
        slow = report.cross_rank.slowest_rank
        chosen = [next((r for r in ranks if r.rank.rank == slow), ranks[0])]
        console.print(
            Text(f"Details of {chosen[0].label} (the slowest); `--rank N` shows another.", style="dim")
        )
    for r in chosen:
        console.print()
        render_rank(console, r, top)
    console.print()
    console.rule("[bold]Findings")
    console.print(findings_group(report.findings))


def _delta(change) -> Text:
    if change.a is None and change.b is not None:
        return Text("only in B")
    if change.b is None and change.a is not None:
        return Text("only in A")
    if change.delta is None:
        return Text("—", style="dim")
    unit = " pp" if change.unit == "pp" else ""
    text = f"{change.delta:+,.2f}{unit}" + (
        f" ({change.delta_pct:+.0f} %)" if change.delta_pct is not None and change.unit != "pp" else ""
    )
    style = {"better": "green", "worse": "red", "same": "dim"}.get(change.verdict, "")
    return Text(text, style=style)


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


def render_comparison(console: Console, cmp: TraceComparison, top: int = 10) -> None:
    console.print(Text.assemble(("A: ", "bold"), cmp.a.label, "\n", ("B: ", "bold"), cmp.b.label))
    table = Table(title="What changed (B vs A)", title_justify="left", header_style="bold")
    for col in ("metric", "A", "B", "change"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for c in cmp.metrics:
        unit = " %" if c.unit == "pp" else (f" {c.unit}" if c.unit else "")
        table.add_row(
            _METRIC_LABEL.get(c.name, c.name), _n(c.a, "{:,.2f}", unit), _n(c.b, "{:,.2f}", unit), _delta(c)
        )
    console.print(table)
    for title, rows in (
        ("Kernel categories", cmp.categories),
        (f"Kernels that changed most (top {top})", cmp.kernels[:top]),
    ):
        if not rows:
            continue
        t = Table(title=f"{title} ({rows[0].unit})", title_justify="left", header_style="bold")
        for col in ("name", "A", "B", "change"):
            t.add_column(
                col,
                justify="left" if col == "name" else "right",
                no_wrap=True,
                overflow="ellipsis",
                max_width=44 if col == "name" else None,
            )
        for c, name in zip(rows, distinct_short_names([c.name for c in rows], 44), strict=True):
            t.add_row(name, _n(c.a, "{:,.2f}"), _n(c.b, "{:,.2f}"), _delta(c))
        console.print(t)
    if cmp.findings_removed:
        console.print(Text("resolved in B: " + ", ".join(cmp.findings_removed), style="green"))
    if cmp.findings_added:
        console.print(Text("new in B: " + ", ".join(cmp.findings_added), style="red"))
    for note in cmp.notes:
        console.print(Text(f"note: {note}", style="yellow"))
