"""Reports of profiled runs, the doctor's before/after, the run list and run comparisons."""

from __future__ import annotations

from typing import Any

from gpuwise.diagnose.statistics import outlier_limit_s
from gpuwise.diagnose.thresholds import DOCTOR_TARGET_SPEEDUP_X, INPUT_WAIT_HIGH_PCT, INPUT_WAIT_MODERATE_PCT
from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.types import PhaseShare, RunSummary, Telemetry
from gpuwise.report.chart_text import bar
from gpuwise.report.document import (
    Block,
    Chart,
    Document,
    Heading,
    Headline,
    KeyFigures,
    Note,
    Paragraph,
    Series,
    Style,
    Table,
)
from gpuwise.report.findings import findings_blocks
from gpuwise.report.units import gib, mib, ms, num, pct
from gpuwise.units import GiB, MiB

__all__ = [
    "PHASE_LABEL",
    "comparison_document",
    "doctor_document",
    "phase_blocks",
    "phase_chart",
    "run_blocks",
    "run_document",
    "run_header",
    "runs_list_document",
    "session_document",
    "step_chart",
    "telemetry_table",
]

PHASE_LABEL = {
    "data_wait": "waiting for data",
    "h2d_copy": "host→device copy",
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer step",
    "host_input": "host, before forward (batch prep)",
    "other": "other (loop, logging…)",
}
_MIN_STEPS_CHARTED = 3


def _phase_style(name: str, share: float) -> Style:
    if name != "data_wait":
        return ""
    return "bad" if share >= INPUT_WAIT_HIGH_PCT else "warn" if share >= INPUT_WAIT_MODERATE_PCT else ""


def phase_blocks(
    phases: dict[str, PhaseShare],
    gpu_phases: dict[str, float] | None = None,
    title: str = "Where each step's time goes",
) -> list[Block]:
    """Where each step's time goes: per phase, ms per step and share (with GPU time per phase when
    measured), as a table."""
    columns = ["phase", "per step", "share", ""] + (["GPU time"] if gpu_phases else [])
    rows = [
        [PHASE_LABEL.get(name, name), ms(row.s_per_step), pct(row.pct), bar(row.pct, 100, 32)]
        + ([ms(gpu_phases.get(name))] if gpu_phases else [])
        for name, row in phases.items()
    ]
    styles = [_phase_style(name, row.pct) for name, row in phases.items()]
    return [Table(columns, rows, caption=title, align="lrrlr", row_styles=styles)]


def phase_chart(labels: list[str], runs: list[dict[str, PhaseShare]], title: str) -> Chart:
    """Stacked bar: each step (or process) split into its phases, milliseconds per step."""
    names = list(dict.fromkeys(name for phases in runs for name in phases))
    return Chart(
        "stacked",
        title,
        labels,
        [
            Series(PHASE_LABEL.get(n, n), [(p[n].s_per_step * 1000 if n in p else 0.0) for p in runs])
            for n in names
        ],
        x_label="time per step (ms)",
        horizontal=True,
        description="Each bar is one step's time split into data wait, copy, forward, backward, optimizer "
        "and the rest: "
        + ", ".join(f"{PHASE_LABEL.get(n, n)} {runs[0][n].pct:.0f} %" for n in names if n in runs[0])
        + ".",
        in_text=len(labels) > 1,
    )


def step_chart(summary: RunSummary) -> Chart | None:
    """The measured step times in order, outliers (the same rule as the step_outliers finding) marked."""
    times = summary.step_times_s
    if len(times) < _MIN_STEPS_CHARTED:
        return None
    limit = outlier_limit_s(times)
    outliers = [i for i, t in enumerate(times) if t > limit]
    first = summary.warmup_steps + 1
    return Chart(
        "line",
        "Step time, step by step",
        [str(first + i) for i in range(len(times))],
        [Series("step time (ms)", [t * 1000 for t in times])],
        x_label="step",
        y_label="step time (ms)",
        marked=outliers,
        mark_label=f"outlier (over {limit * 1000:,.1f} ms)",
        description=f"{len(times)} measured steps from {min(times) * 1000:,.1f} to "
        f"{max(times) * 1000:,.1f} ms; "
        f"{len(outliers)} outlier{'s' if len(outliers) != 1 else ''}.",
    )


def telemetry_table(run: RunSummary) -> Table:
    """What was sampled beside the steps: DataLoader settings, live and peak memory, CPU use."""
    rows: list[list[str]] = []
    loader, tel, mem = run.loader, run.telemetry, run.memory
    if loader is not None:
        rows.append(
            [
                "DataLoader",
                f"num_workers={loader.num_workers}, pin_memory={loader.pin_memory}, "
                f"prefetch_factor={loader.prefetch_factor}, persistent_workers={loader.persistent_workers}, "
                f"batch_size={loader.batch_size}",
            ]
        )
    if tel is not None:
        rows += _telemetry_rows(tel)
    if mem.first_step_bytes is not None and mem.last_step_bytes is not None:
        rows.append(
            [
                "live memory",
                f"{mib(mem.first_step_bytes)} → {mib(mem.last_step_bytes)} MiB over the measured steps "
                f"({mem.measure})",
            ]
        )
    if mem.capacity_bytes:
        rows.append(
            [
                "GPU memory peak",
                f"{gib(mem.peak_reserved_bytes or 0)} GiB reserved of {gib(mem.capacity_bytes)} GiB",
            ]
        )
    return Table(["", ""], rows, caption="Telemetry", header=False)


def _telemetry_rows(tel: Telemetry) -> list[list[str]]:
    rows = [
        [
            "CPU (this run)",
            f"{num(tel.process_cpu_pct)} % of {tel.cpu_count} usable cores (process + workers)",
        ],
        [
            "CPU (whole machine)",
            f"{num(tel.system_cpu_pct)} %  per core: "
            + " ".join(f"{c:.0f}" for c in tel.cpu_per_core_pct)
            + ("  steal n/a" if tel.cpu_steal_pct is None else f"  steal {tel.cpu_steal_pct:.1f} %"),
        ],
    ]
    if tel.rss_peak_bytes:
        rows.append(["RSS peak", f"{tel.rss_peak_bytes / GiB:.2f} GiB"])
    if tel.disk_read_bytes_per_s is not None:
        rows.append(["disk reads", f"{tel.disk_read_bytes_per_s / MiB:.1f} MiB/s (whole machine)"])
    gpu = tel.gpu
    if gpu is not None:
        rows.append(
            [
                "GPU",
                f"util {num(gpu.util_pct)} %, "
                f"memory {num((gpu.memory_used_peak_bytes or 0) / GiB, '{:.1f}')}"
                f" of {num((gpu.memory_total_bytes or 0) / GiB, '{:.1f}')} GiB, "
                f"{num(gpu.power_w_mean)} W, max {num(gpu.temperature_c_max)} °C, "
                f"SM {num(gpu.sm_clock_mhz_mean)} MHz",
            ]
        )
        if gpu.clock_reason_pct:
            rows.append(
                ["clock events", ", ".join(f"{k} {v:.0f} %" for k, v in gpu.clock_reason_pct.items())]
            )
    if tel.not_available:
        rows.append(["not available", ", ".join(sorted(tel.not_available))])
    return rows


def run_header(run: RunSummary, run_id: int | None) -> list[Block]:
    """A run's heading: id, label, status, rank, exit code, then device and step figures."""
    status = run.status or "?"
    head = (
        f"run {run_id if run_id is not None else '(not saved)'}  {run.label}  {status}"
        + (f"  rank {run.rank}" if run.rank is not None else "")
        + (f"  exit code {run.exit_code}" if run.exit_code is not None else "")
    )
    detail = f"{run.device or '?'}" + (f" ({run.gpu_name})" if run.gpu_name else "")
    detail += f"  ·  {run.measured_steps} steps measured after {run.warmup_steps} warm-up"
    blocks: list[Block] = [Headline(head, "strong" if status == "completed" else "warn"), Paragraph(detail)]
    if run.steps_per_s:
        blocks.append(
            KeyFigures(
                [
                    ("steps/s", f"{run.steps_per_s:.2f}"),
                    ("per step", ms(run.step_time_s)),
                    ("median", ms(run.step_time_p50_s)),
                ]
            )
        )
    if run.error:
        blocks.append(Paragraph(f"ended with {run.error}", "warn"))
    return blocks


def run_blocks(run: ProfileRun) -> list[Block]:
    """Everything about one profiled run: header, phases and their chart, step-time chart,
    telemetry, findings."""
    summary = run.summary
    blocks = run_header(summary, run.run_id)
    if summary.phases:
        blocks += phase_blocks(summary.phases, summary.gpu_phases_s)
        blocks.append(phase_chart(["mean step"], [summary.phases], "Phases of the mean step"))
    chart = step_chart(summary)
    if chart is not None:
        blocks.append(chart)
    blocks.append(telemetry_table(summary))
    blocks += [
        Paragraph(
            f"gpuwise contained an internal error in its {err.where} ({err.count}×): {err.error}", "warn"
        )
        for err in summary.hook_errors
    ]
    blocks += [Note(f"note: {note}") for note in summary.notes]
    blocks.append(Heading("Findings", 2))
    blocks += findings_blocks(run.findings, measured=summary.measured_steps > 0)
    return blocks


def run_document(run: ProfileRun) -> Document:
    """`gpuwise runs show ID`: one profiled run."""
    return Document(f"Profiled run: {run.summary.label}").add(*run_blocks(run))


def session_document(session: Any) -> Document:
    """`gpuwise profile`: every rank's run of the profiled command, or why nothing was profiled."""
    label = session.runs[0].summary.label if session.runs else "nothing was profiled"
    doc = Document(f"Profile: {label}")
    if not session.runs:
        doc.add(*(Paragraph(note, "warn") for note in session.notes))
        doc.add(Note(f"command exit code {session.exit_code}"))
        return doc
    if len(session.runs) == 1:
        doc.add(*run_blocks(session.runs[0]))
    else:
        runs = session.runs
        doc.add(
            Table(
                [
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
                ],
                [
                    [
                        str(r.run_id or "—"),
                        str(r.summary.rank),
                        r.summary.status or "",
                        str(r.summary.measured_steps),
                        num(r.summary.steps_per_s, "{:.2f}"),
                        ms(r.summary.step_time_s),
                        *[
                            pct(_share(r.summary.phases.get(p)))
                            for p in ("data_wait", "forward", "backward", "optimizer")
                        ],
                    ]
                    for r in runs
                ],
                caption=f"{len(runs)} processes (one run each)",
                align="rrlrrrrrrr",
            ),
            phase_chart(
                [f"rank {r.summary.rank}" for r in runs],
                [r.summary.phases for r in runs],
                "Phases per step, by process",
            ),
            *phase_blocks(session.phases(), title="Mean over processes"),
            telemetry_table(runs[0].summary),
            Heading("Findings", 2),
            *findings_blocks(session.findings),
        )
    doc.add(*(Note(f"note: {note}") for note in session.notes))
    if session.store:
        ids = ", ".join(str(r.run_id) for r in session.runs)
        doc.add(
            Note(
                f"saved as run {ids} in {session.store} · `gpuwise runs show {session.runs[0].run_id}` · "
                f"exit code {session.exit_code}"
            )
        )
    return doc


def _share(share: PhaseShare | None) -> float:
    return share.pct if share else 0.0


def runs_list_document(rows: Any, store_path: str) -> Document:
    """`gpuwise runs list`: one row per stored run (when, label, rank, status, device, steps/s, top
    finding)."""
    doc = Document(f"Profiled runs ({store_path})")
    doc.add(
        Table(
            ["id", "when (UTC)", "label", "rank", "status", "device", "steps", "steps/s", "top finding"],
            [
                [
                    str(r.id),
                    r.created_at[5:16].replace("T", " "),  # MM-DD HH:MM
                    r.label,
                    "" if r.rank is None else str(r.rank),
                    r.status,
                    r.device,
                    str(r.measured_steps),
                    num(r.steps_per_s, "{:.2f}"),
                    r.top_finding or "—",
                ]
                for r in rows
            ],
            align="rllrllrrl",
        )
    )
    if not rows:
        doc.add(Note("No runs yet: `gpuwise profile -- python train.py` or `gpuwise doctor` records one."))
    return doc


def comparison_document(cmp: Any) -> Document:
    """`gpuwise runs compare A B`: speed-up, phase and metric changes, findings resolved or new."""
    a, b = cmp.a.summary, cmp.b.summary
    doc = Document(f"run {cmp.a.run_id} → run {cmp.b.run_id}")
    if cmp.speedup_x:
        doc.add(
            Headline(
                f"{a.steps_per_s or 0:.2f} → {b.steps_per_s or 0:.2f} steps/s = {cmp.speedup_x:.2f}×",
                "good" if cmp.speedup_x >= 1 else "bad",
            )
        )
    rows, styles = [], []
    for name, row in cmp.phases.items():
        delta = row["delta_s"]
        rows.append(
            [
                PHASE_LABEL.get(name, name),
                ms(row["a_s_per_step"]),
                ms(row["b_s_per_step"]),
                "—" if delta is None else f"{delta * 1000:+,.1f} ms",
            ]
        )
        styles.append("good" if (delta or 0) < 0 else "bad" if (delta or 0) > 0 else "")
    doc.add(
        Table(
            ["phase", f"run {cmp.a.run_id}", f"run {cmp.b.run_id}", "change"],
            rows,
            align="lrrr",
            row_styles=styles,  # type: ignore[arg-type]  # built from "", "good" and "bad"
        ),
        Chart(
            "stacked",
            "Phases per step, before and after",
            [f"run {cmp.a.run_id}", f"run {cmp.b.run_id}"],
            [
                Series(
                    PHASE_LABEL.get(name, name),
                    [(row["a_s_per_step"] or 0) * 1000, (row["b_s_per_step"] or 0) * 1000],
                )
                for name, row in cmp.phases.items()
            ],
            x_label="time per step (ms)",
            horizontal=True,
            description=f"Run {cmp.a.run_id} and run {cmp.b.run_id}, each step split into its phases.",
        ),
    )
    doc.add(
        *(
            Paragraph(f"  {key}: {change['a']} → {change['b']}")
            for key, change in cmp.settings_changed.items()
        )
    )
    if cmp.resolved:
        doc.add(Paragraph("resolved: " + ", ".join(cmp.resolved), "good"))
    if cmp.new:
        doc.add(Paragraph("new: " + ", ".join(cmp.new), "bad"))
    if cmp.persisting:
        doc.add(Paragraph("still there: " + ", ".join(cmp.persisting), "warn"))
    return doc


def _busy_line(result: Any) -> Paragraph:
    """Other processes' CPU during the two runs: a busy machine slows the model, not the storage wait."""
    before, after = result.others_cpu_pct
    own = [r.summary.telemetry.process_cpu_pct for r in (result.before, result.after) if r.summary.telemetry]
    if before is None or after is None or len(own) < 2 or None in own:
        return Paragraph("machine load: not measured (telemetry unavailable)", "muted")
    busy = before > own[0] or after > own[1]  # others used more CPU than the run itself
    return Paragraph(
        f"machine load: other processes used {before:.0f} % (before) and {after:.0f} % (after) of the CPU, "
        f"this run {own[0]:.0f} % and {own[1]:.0f} %"
        + ("; measured on a busy machine, where the speed-up varies more" if busy else ""),
        "warn" if busy else "muted",
    )


def doctor_document(result: Any) -> Document:
    """`gpuwise doctor`: steps/s before and after the fixes applied, each fix's effect and whether
    the target speed-up was reached."""
    doc = Document("gpuwise doctor")
    speed = result.speedup_x
    made_its_point = bool(speed and speed >= DOCTOR_TARGET_SPEEDUP_X)
    doc.add(
        Headline(
            f"before {result.before_steps_per_s:.2f} steps/s  →  after {result.after_steps_per_s:.2f} steps/s"
            f"   = {speed:.2f}× faster",
            "good" if made_its_point else "warn",
        ),
        Note(
            "same model, data, batch size and seed; changed only: "
            + (", ".join(dict.fromkeys(f.setting for f in result.applied_fixes)) or "nothing")
            + f" · device {result.device}"
        ),
        _busy_line(result),
        Heading("1. Reference workload, as written (naive input pipeline)", 2),
    )
    if result.sizing is not None:
        sz = result.sizing
        doc.add(
            Note(
                f"sized to this machine now: a batch computes in {ms(sz.compute_s)} and decodes in "
                f"{ms(sz.decode_s)}; storage latency set to {sz.storage_latency_s * 1000:.2f} ms per sample "
                f"so that loading takes {sz.to_dict()['load_to_compute']:.0f}× the compute"
            )
        )
    doc.add(*run_blocks(result.before))
    doc.add(Heading("2. Fixes applied automatically (from the findings above)", 2))
    if result.applied_fixes:
        doc.add(
            Table(
                ["finding", "setting", "before", "after", "why"],
                [
                    [f.finding_id or "—", f.setting, str(f.before), str(f.after), f.reason]
                    for f in result.applied_fixes
                ],
            )
        )
    else:
        doc.add(Paragraph("No finding had a fix that is safe to apply automatically."))
    doc.add(*(Note(f"not automatic: {item['finding_id']} — {item['why']}") for item in result.manual_fixes))
    doc.add(Heading("3. Re-run with the fixes", 2), *run_header(result.after.summary, result.after.run_id))
    doc.add(*phase_blocks(result.after.phases, result.after.summary.gpu_phases_s))
    doc.add(
        phase_chart(
            ["before", "after"],
            [result.before.summary.phases, result.after.phases],
            "Phases per step, before and after",
        )
    )
    if result.after.findings:
        doc.add(
            Paragraph(
                "Remaining findings: " + ", ".join(f"{f.id} ({f.severity})" for f in result.after.findings)
            )
        )
    if result.tune is not None:
        from gpuwise.report.tune_view import trials_table

        doc.add(
            Heading("Trials (gpuwise tune on the reference workload, each a fresh process)", 2),
            trials_table(result.tune),
        )
    if result.before.run_id is not None:
        doc.add(
            Note(
                f"runs {result.before.run_id} and {result.after.run_id} saved · "
                f"`gpuwise runs compare {result.before.run_id} {result.after.run_id}`"
            )
        )
    return doc
