"""Terminal views of profiled runs, the doctor's before/after, the run list and run comparisons."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from gpuwise.diagnose.thresholds import DOCTOR_TARGET_SPEEDUP_X, INPUT_WAIT_HIGH_PCT, INPUT_WAIT_MODERATE_PCT
from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.types import PhaseShare, RunSummary, Telemetry
from gpuwise.units import GiB, MiB

SEVERITY_STYLE = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "yellow",
    "low": "cyan",
    "info": "dim",
}
PHASE_LABEL = {
    "data_wait": "waiting for data",
    "h2d_copy": "host→device copy",
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer step",
    "host_input": "host, before forward (batch prep)",
    "other": "other (loop, logging…)",
}
BAR_WIDTH = 32


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:,.1f} ms"


def _num(value: float | None, fmt: str = "{:,.1f}") -> str:
    return "—" if value is None else fmt.format(value)


def _pct(share: PhaseShare | None) -> str:
    return f"{share.pct if share else 0:.1f} %"


def _bar(pct: float, style: str = "green") -> Text:
    filled = max(0, min(BAR_WIDTH, round(pct / 100 * BAR_WIDTH)))
    return Text("█" * filled, style=style) + Text("░" * (BAR_WIDTH - filled), style="dim")


def phase_table(
    phases: dict[str, PhaseShare],
    gpu_phases: dict[str, float] | None = None,
    title: str = "Where each step's time goes",
) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    table.add_column("phase")
    table.add_column("per step", justify="right")
    table.add_column("share", justify="right")
    table.add_column("", no_wrap=True)
    if gpu_phases:
        table.add_column("GPU time", justify="right")
    for name, row in phases.items():
        style = (
            "red"
            if name == "data_wait" and row.pct >= INPUT_WAIT_HIGH_PCT
            else "yellow"
            if name == "data_wait" and row.pct >= INPUT_WAIT_MODERATE_PCT
            else "green"
        )
        cells: list[Any] = [
            PHASE_LABEL.get(name, name),
            _ms(row.s_per_step),
            f"{row.pct:.1f} %",
            _bar(row.pct, style),
        ]
        if gpu_phases:
            cells.append(_ms(gpu_phases.get(name)))
        table.add_row(*cells)
    return table


def findings_group(
    findings: list[dict[str, Any]] | list[Any], limit: int | None = None, measured: bool = True
) -> Group:
    """The findings as panels; ``measured=False`` (no step was measured) never claims a clean run."""
    items: list[Any] = []
    for f in findings[:limit] if limit else findings:
        f = f if isinstance(f, dict) else f.to_dict()
        head = Text.assemble(
            (f" {f['severity'].upper()} ", SEVERITY_STYLE.get(f["severity"], "")),
            " ",
            (f["title"], "bold"),
            (f"  [{f['id']}, confidence {f['confidence']}]", "dim"),
        )
        parts: list[Any] = [head, Text(f["summary"]), Text.assemble(("fix: ", "bold"), f["fix"])]
        gain = f.get("gain")
        if gain:
            parts.append(
                Text.assemble(
                    ("expected: ", "bold"),
                    _gain_text(gain),
                    (f"  ({gain['note']})" if gain.get("note") else "", "dim"),
                )
            )
        if f.get("fix_snippet"):
            parts.append(Syntax(f["fix_snippet"], "python", theme="ansi_dark", background_color="default"))
        items.append(
            Panel(
                Group(*parts),
                border_style=SEVERITY_STYLE.get(f["severity"], "white").split()[-1],
                padding=(0, 1),
            )
        )
    if not items and measured:
        items.append(Text("No findings: nothing in this run crossed a threshold.", style="green"))
    return Group(*items)


def _gain_text(gain: dict[str, Any]) -> str:
    metric, low, high = gain["metric"], gain["low"], gain["high"]
    if metric == "throughput_x":
        return f"{low:.2f}–{high:.2f}× steps/s"
    if metric == "step_time_pct":
        return f"{low:.0f}–{high:.0f} % shorter steps"
    if metric == "memory_bytes":
        return f"{low / GiB:.2f}–{high / GiB:.2f} GiB less memory"
    if metric == "cost_pct":
        return f"{low:.0f}–{high:.0f} % lower cost"
    return f"{low}–{high} {metric}"


def telemetry_table(run: RunSummary) -> Table:
    table = Table(title="Telemetry", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    loader, tel, mem = run.loader, run.telemetry, run.memory
    if loader is not None:
        table.add_row(
            "DataLoader",
            f"num_workers={loader.num_workers}, pin_memory={loader.pin_memory}, "
            f"prefetch_factor={loader.prefetch_factor}, persistent_workers={loader.persistent_workers}, "
            f"batch_size={loader.batch_size}",
        )
    if tel is not None:
        _telemetry_rows(table, tel)
    if mem.first_step_bytes is not None and mem.last_step_bytes is not None:
        table.add_row(
            "live memory",
            f"{mem.first_step_bytes / MiB:,.1f} → {mem.last_step_bytes / MiB:,.1f} MiB "
            "over the measured steps "
            f"({mem.measure})",
        )
    if mem.capacity_bytes:
        table.add_row(
            "GPU memory peak",
            f"{(mem.peak_reserved_bytes or 0) / GiB:.2f} GiB reserved of {mem.capacity_bytes / GiB:.2f} GiB",
        )
    return table


def _telemetry_rows(table: Table, tel: Telemetry) -> None:
    table.add_row(
        "CPU (this run)",
        f"{_num(tel.process_cpu_pct, '{:.0f}')} % of {tel.cpu_count} usable cores (process + workers)",
    )
    table.add_row(
        "CPU (whole machine)",
        f"{_num(tel.system_cpu_pct, '{:.0f}')} %  per core: "
        + " ".join(f"{c:.0f}" for c in tel.cpu_per_core_pct)
        + ("  steal n/a" if tel.cpu_steal_pct is None else f"  steal {tel.cpu_steal_pct:.1f} %"),
    )
    if tel.rss_peak_bytes:
        table.add_row("RSS peak", f"{tel.rss_peak_bytes / GiB:.2f} GiB")
    if tel.disk_read_bytes_per_s is not None:
        table.add_row("disk reads", f"{tel.disk_read_bytes_per_s / MiB:.1f} MiB/s (whole machine)")
    gpu = tel.gpu
    if gpu is not None:
        table.add_row(
            "GPU",
            f"util {_num(gpu.util_pct, '{:.0f}')} %, "
            f"memory {_num((gpu.memory_used_peak_bytes or 0) / GiB, '{:.1f}')}"
            f" of {_num((gpu.memory_total_bytes or 0) / GiB, '{:.1f}')} GiB, "
            f"{_num(gpu.power_w_mean, '{:.0f}')} W, "
            f"max {_num(gpu.temperature_c_max, '{:.0f}')} °C, SM {_num(gpu.sm_clock_mhz_mean, '{:.0f}')} MHz",
        )
        if gpu.clock_reason_pct:
            table.add_row(
                "clock events", ", ".join(f"{k} {v:.0f} %" for k, v in gpu.clock_reason_pct.items())
            )
    if tel.not_available:
        table.add_row("not available", ", ".join(sorted(tel.not_available)))


def run_header(run: RunSummary, run_id: int | None) -> Text:
    status = run.status or "?"
    style = "green" if status == "completed" else "yellow"
    text = Text.assemble(
        ("run ", "dim"),
        (str(run_id) if run_id is not None else "(not saved)", "bold"),
        ("  ", ""),
        (run.label, "bold"),
        ("  ", ""),
        (status, style),
        (f"  rank {run.rank}" if run.rank is not None else "", ""),
        (f"  exit code {run.exit_code}" if run.exit_code is not None else "", "dim"),
    )
    text.append(f"\n{run.device or '?'}" + (f" ({run.gpu_name})" if run.gpu_name else ""))
    text.append(f"  ·  {run.measured_steps} steps measured after {run.warmup_steps} warm-up")
    if run.steps_per_s:
        text.append(
            f"  ·  {run.steps_per_s:.2f} steps/s, {_ms(run.step_time_s)} per step "
            f"(median {_ms(run.step_time_p50_s)})"
        )
    if run.error:
        text.append(f"\nended with {run.error}", style="yellow")
    return text


def render_run(console: Console, run: ProfileRun) -> None:
    summary = run.summary
    console.print(run_header(summary, run.run_id))
    if summary.phases:
        console.print(phase_table(summary.phases, summary.gpu_phases_s))
    console.print(telemetry_table(summary))
    for err in summary.hook_errors:
        console.print(
            f"[yellow]gpuwise contained an internal error in its {err.where} ({err.count}×): "
            f"{err.error}[/yellow]"
        )
    for note in summary.notes:
        console.print(f"[dim]note: {note}[/dim]")
    console.print(findings_group(run.findings, measured=summary.measured_steps > 0))


def render_session(console: Console, session) -> None:
    if not session.runs:
        for note in session.notes:
            console.print(f"[yellow]{note}[/yellow]")
        console.print(f"[dim]command exit code {session.exit_code}[/dim]")
        return
    if len(session.runs) == 1:
        render_run(console, session.runs[0])
    else:
        table = Table(
            title=f"{len(session.runs)} processes (one run each)", header_style="bold", title_justify="left"
        )
        for col in (
            "run",
            "rank",
            "status",
            "steps",
            "steps/s",
            "step",
            "data wait",
            "forward",
            "backward",
            "optimizer",
        ):
            table.add_column(col, justify="left" if col in {"status"} else "right")
        for run in session.runs:
            d = run.summary
            table.add_row(
                str(run.run_id or "—"),
                str(d.rank),
                d.status or "",
                str(d.measured_steps),
                _num(d.steps_per_s, "{:.2f}"),
                _ms(d.step_time_s),
                *[_pct(d.phases.get(p)) for p in ("data_wait", "forward", "backward", "optimizer")],
            )
        console.print(table)
        console.print(phase_table(session.phases(), title="Mean over processes"))
        console.print(telemetry_table(session.runs[0].summary))
        console.print(findings_group(session.findings))
    for note in session.notes:
        console.print(f"[dim]note: {note}[/dim]")
    if session.store:
        ids = ", ".join(str(r.run_id) for r in session.runs)
        console.print(
            f"[dim]saved as run {ids} in {session.store} · `gpuwise runs show {session.runs[0].run_id}` · "
            f"exit code {session.exit_code}[/dim]"
        )


def render_runs_list(console: Console, rows, store_path: str) -> None:
    table = Table(title=f"Profiled runs ({store_path})", header_style="bold", title_justify="left")
    for col in ("id", "when (UTC)", "label", "rank", "status", "device", "steps", "steps/s", "top finding"):
        table.add_column(
            col,
            justify="right" if col in {"id", "rank", "steps", "steps/s"} else "left",
            no_wrap=col in {"id", "when (UTC)", "steps/s"},
            overflow="fold",
        )
    for r in rows:
        when = r.created_at[5:16].replace("T", " ")  # MM-DD HH:MM
        table.add_row(
            str(r.id),
            when,
            r.label,
            "" if r.rank is None else str(r.rank),
            r.status,
            r.device,
            str(r.measured_steps),
            _num(r.steps_per_s, "{:.2f}"),
            r.top_finding or "—",
        )
    console.print(table)
    if not rows:
        console.print(
            "[dim]No runs yet: `gpuwise profile -- python train.py` or `gpuwise doctor` records one.[/dim]"
        )


def render_comparison(console: Console, cmp) -> None:
    a, b = cmp.a.summary, cmp.b.summary
    title = f"run {cmp.a.run_id} → run {cmp.b.run_id}"
    head = Text(title, style="bold")
    if cmp.speedup_x:
        head.append(f"   {a.steps_per_s or 0:.2f} → {b.steps_per_s or 0:.2f} steps/s = ", style="")
        head.append(f"{cmp.speedup_x:.2f}×", style="bold green" if cmp.speedup_x >= 1 else "bold red")
    console.print(head)
    table = Table(header_style="bold")
    for col in ("phase", f"run {cmp.a.run_id}", f"run {cmp.b.run_id}", "change"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for name, row in cmp.phases.items():
        delta = row["delta_s"]
        table.add_row(
            PHASE_LABEL.get(name, name),
            _ms(row["a_s_per_step"]),
            _ms(row["b_s_per_step"]),
            Text(
                "—" if delta is None else f"{delta * 1000:+,.1f} ms",
                style="green" if (delta or 0) < 0 else "red" if (delta or 0) > 0 else "",
            ),
        )
    console.print(table)
    for key, change in cmp.settings_changed.items():
        console.print(f"  {key}: {change['a']} → {change['b']}")
    if cmp.resolved:
        console.print("[green]resolved:[/green] " + ", ".join(cmp.resolved))
    if cmp.new:
        console.print("[red]new:[/red] " + ", ".join(cmp.new))
    if cmp.persisting:
        console.print("[yellow]still there:[/yellow] " + ", ".join(cmp.persisting))


def _busy_line(result) -> Text:
    """Other processes' CPU during the two runs: a busy machine slows the model, not the storage wait."""
    before, after = result.others_cpu_pct
    own = [r.summary.telemetry.process_cpu_pct for r in (result.before, result.after) if r.summary.telemetry]
    if before is None or after is None or len(own) < 2 or None in own:
        return Text("machine load: not measured (telemetry unavailable)", style="dim")
    busy = before > own[0] or after > own[1]  # others used more CPU than the run itself
    return Text(
        f"machine load: other processes used {before:.0f} % (before) and {after:.0f} % (after) of the CPU, "
        f"this run {own[0]:.0f} % and {own[1]:.0f} %"
        + ("; measured on a busy machine, where the speed-up varies more" if busy else ""),
        style="yellow" if busy else "dim",
    )


def render_doctor(console: Console, result) -> None:
    console.rule("[bold]1. Reference workload, as written (naive input pipeline)")
    if result.sizing is not None:
        sz = result.sizing
        console.print(
            f"[dim]sized to this machine now: a batch computes in {_ms(sz.compute_s)} and decodes in "
            f"{_ms(sz.decode_s)}; storage latency set to {sz.storage_latency_s * 1000:.2f} ms per sample "
            "so that "
            f"loading takes {sz.to_dict()['load_to_compute']:.0f}× the compute[/dim]"
        )
    render_run(console, result.before)
    console.rule("[bold]2. Fixes applied automatically (from the findings above)")
    if result.applied_fixes:
        table = Table(header_style="bold")
        for col in ("finding", "setting", "before", "after", "why"):
            table.add_column(col)
        for fix in result.applied_fixes:
            table.add_row(fix.finding_id, fix.setting, str(fix.before), str(fix.after), fix.reason)
        console.print(table)
    else:
        console.print("No finding had a fix that is safe to apply automatically.")
    for item in result.manual_fixes:
        console.print(f"[dim]not automatic: {item['finding_id']} — {item['why']}[/dim]")
    console.rule("[bold]3. Re-run with the fixes")
    console.print(run_header(result.after.summary, result.after.run_id))
    console.print(phase_table(result.after.phases, result.after.summary.gpu_phases_s))
    if result.after.findings:
        console.print(
            "Remaining findings: " + ", ".join(f"{f.id} ({f.severity})" for f in result.after.findings)
        )
    speed = result.speedup_x
    made_its_point = bool(speed and speed >= DOCTOR_TARGET_SPEEDUP_X)
    style = "bold green" if made_its_point else "bold yellow"
    console.print(
        Panel(
            Text.assemble(
                ("before ", "dim"),
                (f"{result.before_steps_per_s:.2f} steps/s", "bold"),
                ("  →  after ", "dim"),
                (f"{result.after_steps_per_s:.2f} steps/s", "bold"),
                ("   = ", ""),
                (f"{speed:.2f}× faster", style),
                (
                    "\nsame model, data, batch size and seed; changed only: "
                    + (", ".join(dict.fromkeys(f.setting for f in result.applied_fixes)) or "nothing")
                    + f" · device {result.device}",
                    "dim",
                ),
            ),
            title="gpuwise doctor",
            border_style="green" if made_its_point else "yellow",
        )
    )
    console.print(_busy_line(result))
    if result.before.run_id is not None:
        console.print(
            f"[dim]runs {result.before.run_id} and {result.after.run_id} saved · "
            f"`gpuwise runs compare {result.before.run_id} {result.after.run_id}`[/dim]"
        )
