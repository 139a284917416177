"""The plan as a Document (terminal, Markdown and HTML all draw this one view)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuwise.diagnose import Finding
from gpuwise.diagnose.finding import Severity
from gpuwise.plan.techniques import describe
from gpuwise.plan.types import Outcome, Plan, Technique, Verdict
from gpuwise.report import tco_view, terminal
from gpuwise.report.document import Bars, Bullets, Code, Document, Heading, Paragraph, Style, Table
from gpuwise.report.plan_charts import plan_charts
from gpuwise.report.units import gib, num, usd
from gpuwise.units import fmt_duration, fmt_rate

__all__ = ["markdown", "plan_document", "render"]

_SEVERITY_STYLE: dict[Severity, Style] = {
    "critical": "bad",
    "high": "warn",
    "medium": "",
    "low": "muted",
    "info": "muted",
}
_VERDICT_STYLE: dict[Verdict, Style] = {"recommended": "good", "optional": "", "not-recommended": "muted"}
_HARDWARE_ROWS = 12


def _gib(n: float | None) -> str:
    return gib(n, 1) if n is None else f"{gib(n, 1)} GiB"


_num = num


def _usd(x: float | None) -> str:
    return usd(x, 2 if x is None or x >= 0.1 else 4)


def _speed(o: Outcome) -> str:
    return "—" if not o.throughput else f"{fmt_rate(o.throughput)} {o.throughput_unit}"


def _latency(o: Outcome) -> str:
    if o.tpot_ms is not None:
        return (
            f"{o.tpot_ms:,.1f} ms/token, TTFT {o.ttft_ms:,.0f} ms"
            if o.ttft_ms is not None
            else f"{o.tpot_ms:,.1f} ms/token"
        )
    if o.step_time_s is not None:
        return f"{o.step_time_s:,.3g} s/step"
    return "—"


def _mfu(outcome: Outcome) -> str:
    """MFU against the BF16 peak, with the FP8/FP4 figure beside it when that dtype computes."""
    text = _num(outcome.mfu_pct, "{:.0f} %")
    if outcome.mfu_compute_dtype_pct is not None:
        text += f" ({outcome.mfu_compute_dtype_pct:.0f} % of the {outcome.compute_dtype} peak)"
    return text


def _per_1m(o: Outcome, cv: bool) -> str:
    """$ per 1M of what the outcome is priced on (training tokens, output tokens, images): the label says
    which, so the figure reads as the same number `cost` shows under that name."""
    if o.usd_per_1m is None:
        return "—"
    what = "images" if cv else _PRICED_ON.get(o.throughput_unit, "tokens")
    return f"{_usd(o.usd_per_1m)} / 1M {what}"


_PRICED_ON = {"tokens/s": "tokens", "output tokens/s": "output tokens"}


def _mem(o: Outcome) -> str:
    return (
        f"{_gib(o.peak_bytes)} ({o.headroom_pct:.0f} % free)"
        if o.fits
        else f"{_gib(o.peak_bytes)} (does not fit)"
    )


def _changes(changes: dict[str, Any]) -> str:
    parts = []
    for key, value in changes.items():
        if isinstance(value, tuple) and len(value) == 2:
            parts.append(f"{key}: {value[0]} → {value[1]}")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def _title(plan: Plan) -> str:
    w = plan.workload
    return f"gpuwise plan: {w.name or w.model} ({w.task}) on {w.num_gpus} × {w.gpu}, goal: {plan.goal}"


def _fit(doc: Document, plan: Plan) -> None:
    fit = plan.fit
    doc.add(Paragraph(fit.message, "good" if fit.fits_current else "bad"))
    if fit.options:
        doc.add(
            Table(
                ["What would make it fit", "Where", "Memory per GPU", "Free", "Speed"],
                [
                    [
                        o.label,
                        f"{o.num_gpus} × {o.gpu}",
                        _gib(o.outcome.peak_bytes),
                        f"{o.outcome.headroom_pct:.0f} %",
                        _speed(o.outcome),
                    ]
                    for o in fit.options
                ],
                align="llrrr",
            )
        )


def _diagnosis(doc: Document, plan: Plan) -> None:
    d = plan.diagnosis
    doc.add(Heading("1. Diagnosis"), Paragraph(d.summary, "strong"))
    if d.findings:
        rows: list[list[str]] = []
        styles: list[Style] = []
        for f in d.findings:
            fix = f.fix + (f"\nexpected: {_gain(f)}" if f.gain is not None else "")
            rows.append(
                [f.severity, f"{f.title}\n{f.summary}", fix, f"{f.source}\n({f.confidence} confidence)"]
            )
            styles.append(_SEVERITY_STYLE[f.severity])
        doc.add(Table(["Severity", "Finding", "Fix", "Evidence"], rows, row_styles=styles))
    else:
        doc.add(
            Paragraph(
                "No rule fired on the evidence: nothing in the predictions or measurements crosses a "
                "threshold.",
                "muted",
            )
        )
    if d.idle_causes:
        doc.add(
            Heading("Why the GPU idles: the usual causes", 3),
            Table(
                ["Cause", "Status", "Detail", "How to check"],
                [[c.what, c.status, c.detail, c.how_to_check] for c in d.idle_causes],
                row_styles=[
                    "bad" if c.status == "found" else "muted" if c.status == "ruled-out" else ""
                    for c in d.idle_causes
                ],
            ),
        )


def _gain(f: Finding) -> str:
    g = f.gain
    if g is None:
        return ""
    if g.metric == "throughput_x":
        text = f"{g.low:.2f}–{g.high:.2f}× speed"
    elif g.metric == "memory_bytes":
        text = f"{_gib(g.low)}–{_gib(g.high)} less memory"
    else:
        text = f"{g.low:.0f}–{g.high:.0f} % less " + ("step time" if g.metric == "step_time_pct" else "cost")
    return text


def _technique_row(i: int, t: Technique) -> list[str]:
    return [
        str(i),
        f"{t.title}\n{_changes(t.changes)}",
        describe(t.impact, t.after)
        + (f" (at most {t.capped_throughput_x:.2f}× while the GPU idles)" if t.capped_throughput_x else "")
        + f"\nquality risk: {t.quality_risk}, effort: {t.effort}",
        f"{t.verdict}\n{t.reason}",
    ]


def _techniques(doc: Document, plan: Plan) -> None:
    doc.add(Heading("2. Techniques, ranked for the goal"))
    measured = [f for f in plan.diagnosis.findings if f.source != "prediction" and f.fix]
    if measured:
        doc.add(
            Paragraph("From measured evidence (gain estimated by the rule from the measurement):", "strong"),
            Bullets([f"{f.title}: {f.fix}" for f in measured]),
        )
    if not plan.techniques:
        doc.add(Paragraph("No applicable technique changes the predictions for this workload.", "muted"))
        return
    doc.add(
        Paragraph(
            "Each impact below is the memory and performance models re-run on the changed workload "
            "(vs the current configuration; recommended steps vs the step before them).",
            "muted",
        ),
        Table(
            ["#", "Technique and change", "Predicted impact", "Verdict"],
            [_technique_row(i + 1, t) for i, t in enumerate(plan.techniques)],
            row_styles=[_VERDICT_STYLE[t.verdict] for t in plan.techniques],
        ),
    )
    caveats = [
        f"{t.title}: {t.caveat}" + (f" [{t.caveat_source}]" if t.caveat_source else "")
        for t in plan.techniques
        if t.verdict != "not-recommended" and t.caveat
    ]
    if caveats:
        doc.add(Paragraph("Caveats:", "muted"), Bullets(caveats, "muted"))


def _config(doc: Document, plan: Plan) -> None:
    """Section 3: what changes (and whether the global batch does), current against recommended, and
    the snippets to paste."""
    c = plan.config
    doc.add(Heading("3. Configuration changes"))
    if c.note:
        doc.add(Paragraph(c.note, "warn"))
    if not c.changes:
        doc.add(
            Paragraph(
                "Keep the current configuration: no change improves the goal by the required margin.", "good"
            )
        )
    else:
        doc.add(Paragraph("Applied in order: " + " → ".join(c.applied) + "." if c.applied else "Changes:"))
        if c.global_batch_before is not None and c.global_batch_after is not None:
            same = c.global_batch_before == c.global_batch_after
            unit = "images" if plan.workload.is_cv else "sequences"
            doc.add(
                Paragraph(
                    f"Global batch {c.global_batch_before} → {c.global_batch_after} {unit} per optimizer step"
                    + (
                        " (unchanged: same optimization)."
                        if same
                        else " (changed: re-tune the learning rate)."
                    ),
                    "good" if same else "warn",
                )
            )
    doc.add(Table(["", "current", "recommended"], _config_rows(plan), align="lrr"))
    for label, text in c.snippets.items():
        doc.add(
            Code(
                text,
                label=label,
                language="yaml" if label.endswith(".yaml") else "json" if label.endswith(".json") else "",
            )
        )


def _config_rows(plan: Plan) -> list[list[str]]:
    """Current against recommended: GPUs, memory per GPU, throughput, latency, MFU, cost, training run
    ("—" where the current configuration does not fit)."""
    now, after, w = plan.current, plan.config.outcome, plan.workload
    rows = [
        ["GPUs", f"{now.num_gpus} × {now.gpu}", f"{after.num_gpus} × {after.gpu}"],
        [
            "memory per GPU",
            f"{_gib(now.peak_bytes)} ({now.headroom_pct:.0f} % free)"
            if now.fits
            else f"{_gib(now.peak_bytes)} (does not fit)",
            f"{_gib(after.peak_bytes)} ({after.headroom_pct:.0f} % free)",
        ],
        ["throughput", _speed(now) if now.fits else "—", _speed(after)],
        ["latency", _latency(now) if now.fits else "—", _latency(after)],
    ]
    if now.mfu_pct is not None or after.mfu_pct is not None:
        rows.append(["MFU (BF16 peak)", _mfu(now) if now.fits else "—", _mfu(after)])
    rows.append(["cost", _per_1m(now, w.is_cv) if now.fits else "—", _per_1m(after, w.is_cv)])
    if after.usd_per_run is not None:
        rows.append(
            [
                "training run",
                f"{_usd(now.usd_per_run)}, {fmt_duration(now.run_time_s)}"
                if now.fits and now.run_time_s
                else "—",
                f"{_usd(after.usd_per_run)}, {fmt_duration(after.run_time_s)}" if after.run_time_s else "—",
            ]
        )
    return rows


def _breakdown_items(memory: dict[str, Any]) -> list[tuple[str, float]]:
    """(component, bytes) pairs of a memory estimate's breakdown, largest first."""
    raw = memory.get("breakdown_bytes") or {}
    items: list[tuple[str, float]] = []
    if isinstance(raw, dict):
        items = [
            (k.removesuffix("_bytes").replace("_", " "), float(v))
            for k, v in raw.items()
            if isinstance(v, (int, float))
        ]
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, dict):
                value = item.get("bytes", item.get("value_bytes"))
                if isinstance(value, (int, float)):
                    items.append(
                        (str(item.get("name") or item.get("label") or item.get("component")), float(value))
                    )
    return sorted([i for i in items if i[1] > 0], key=lambda kv: -kv[1])


def _memory(doc: Document, plan: Plan) -> None:
    doc.add(Heading("4. VRAM per GPU"))
    views = [("current", plan.memory.current)]
    if plan.memory.recommended:
        views.append(("recommended", plan.memory.recommended))
    for name, mem in views:
        capacity = float(mem.get("gpu_memory_bytes") or 0)
        total = float(mem.get("device_total_bytes") or 0)
        items = _breakdown_items(mem)
        free = mem.get("headroom_pct")
        caption = (
            f"{name}: {_gib(total)} of {_gib(capacity)} per GPU"
            + (f" ({free:.0f} % free)" if free is not None and free >= 0 else " (does not fit)")
            + (f", peak in {mem['peak_phase']}" if mem.get("peak_phase") else "")
            + (
                f"; torch would report {_gib(mem.get('peak_allocated_bytes'))} allocated, "
                f"{_gib(mem.get('peak_reserved_bytes'))} reserved"
            )
            + f" [{plan.memory.method if name == 'current' else 'analytic'}]"
        )
        if items:
            doc.add(
                Bars(
                    [(label, value, _gib(value)) for label, value in items],
                    total=max(capacity, total),
                    total_label=f"{_gib(total)} of {_gib(capacity)}",
                    caption=caption,
                )
            )
        else:
            doc.add(Paragraph(caption))


def _scaling(doc: Document, plan: Plan) -> None:
    s = plan.scaling
    doc.add(
        Heading("5. Scaling"),
        Paragraph(
            f"Decision: {s.strategy}"
            + (f" ({s.num_gpus} GPU{'s' if s.num_gpus != 1 else ''})" if s.num_gpus else "")
            + ".",
            "strong",
        ),
        Paragraph(s.reason),
    )
    if s.global_batch_note:
        doc.add(Paragraph(s.global_batch_note, "warn"))
    if s.nvlink != "n/a":
        doc.add(Paragraph(f"NVLink: {s.nvlink}. {s.nvlink_reason}", "warn" if s.nvlink == "required" else ""))
    if s.options:
        cv = plan.workload.is_cv
        rows = []
        styles: list[Style] = []
        shown = [o for o in s.options if o.best_at_count or o.label == s.strategy]
        doc.add(
            Paragraph(
                "The layout the decision rule picks at each GPU count (all layouts tried are in --json):",
                "muted",
            )
        )
        for o in shown:
            out = o.outcome
            rows.append(
                [
                    o.label,
                    _mem(out),
                    _speed(out) if out.fits else "—",
                    _latency(out) if out.fits else "—",
                    _num(out.comm_exposed_pct, "{:.0f} %"),
                    _per_1m(out, cv) if out.fits else "—",
                ]
            )
            styles.append("good" if o.label == s.strategy else "" if out.fits else "muted")
        doc.add(
            Table(
                ["Layout", "Memory/GPU", "Throughput", "Latency", "Exposed comm", "Cost"],
                rows,
                align="lrrrrr",
                row_styles=styles,
            )
        )
    doc.add(*tco_view.plan_blocks(s.tco, s.tco_note))  # buy vs rent vs API
    _input_pipeline(doc, plan)


def _input_pipeline(doc: Document, plan: Plan) -> None:
    """Vision training: cores and storage reads per GPU for the predicted images/s, loaders ranked."""
    sizing = plan.input_pipeline
    if sizing is None:
        return
    node = (
        f" The usual node, {sizing.node}, has {sizing.node_cores_per_gpu} cores per GPU "
        f"({sizing.usable_cores_per_gpu:.0f} usable for loader workers): {sizing.verdict}."
        if sizing.node
        else " Compare with your node's physical cores per GPU."
    )
    doc.add(
        Paragraph("Input pipeline per GPU", "strong"),
        Paragraph(
            f"{sizing.images_per_s_per_gpu:,.0f} images/s per GPU at {sizing.crop_px} px (source JPEGs "
            f"~{sizing.source_resolution}): {sizing.read_mb_per_s_per_gpu:,.0f} MB/s of storage reads per "
            f"GPU ({sizing.read_mb_per_s_total:,.0f} MB/s for the job, first epoch).{node}"
        ),
        Table(
            ["Loader (ranked)", "Cores/GPU", "GPU ms/s", "Fits the node", "How"],
            [
                [
                    o.name,
                    f"{o.cores_per_gpu:.1f}" if o.cores_per_gpu else "—",
                    f"{o.gpu_ms_per_s:,.0f}" if o.gpu_ms_per_s else "—",
                    "—" if o.fits is None else "yes" if o.fits else "no",
                    o.how,
                ]
                for o in sizing.options
            ],
            align="lrrll",
        ),
        Paragraph("Per-core rates: " + "; ".join(sizing.sources), "muted"),
    )


def _tools(doc: Document, plan: Plan) -> None:
    doc.add(Heading("6. Tools"))
    if plan.tools:
        doc.add(Table(["Tool", "Why here", "Source"], [[t.name, t.why, t.source] for t in plan.tools]))


def _hardware(doc: Document, plan: Plan) -> None:
    doc.add(Heading("Hardware options"))
    w = plan.workload
    shown = plan.hardware[:_HARDWARE_ROWS]
    if not shown:
        doc.add(Paragraph("No catalog GPU was evaluated.", "muted"))
        return
    reqs = f" Requirements: {', '.join(w.requirements)}." if w.requirements else ""
    doc.add(
        Paragraph(
            f"Ranked for goal '{plan.goal}', each with the recommended configuration moved to it "
            f"(and made to fit where needed).{reqs}",
            "muted",
        )
    )
    rows = []
    styles: list[Style] = []
    for h in shown:
        o = h.outcome
        cost = _usd(o.usd_per_run) + " / run" if o.usd_per_run is not None else _per_1m(o, w.is_cv)
        rows.append(
            [
                str(h.rank),
                f"{h.num_gpus} × {h.gpu}",
                _mem(o),
                _speed(o) if o.fits else "—",
                _latency(o) if o.fits else "—",
                _usd(o.usd_per_hour) + "/h" if o.usd_per_hour is not None else "—",
                cost if o.fits else "—",
                _changes(h.config) or "—",
            ]
        )
        styles.append("muted" if not o.fits or not h.meets_requirements else "")
    doc.add(
        Table(
            ["#", "GPU", "Memory/GPU", "Throughput", "Latency", "Price", "Cost", "Changes"],
            rows,
            align="llrrrrrl",
            row_styles=styles,
        )
    )
    grouped: dict[str, list[str]] = {}
    for h in shown:
        for caveat in h.caveats:
            grouped.setdefault(caveat, []).append(h.gpu)
    if grouped:
        doc.add(Bullets([f"{', '.join(gpus)}: {caveat}" for caveat, gpus in grouped.items()], "muted"))
    if len(plan.hardware) > len(shown):
        doc.add(Paragraph(f"{len(plan.hardware) - len(shown)} more in --json.", "muted"))


def plan_document(plan: Plan) -> Document:
    """`gpuwise plan`: the six sections (diagnosis, techniques, configuration, VRAM, scaling,
    tools), hardware options, the fit report, evidence and notes."""
    w = plan.workload
    src = f"{w.source}: " if w.source else ""
    shape = f"image {w.image_size} px" if w.is_cv else f"sequence {w.seq_len:,}"
    doc = Document(
        _title(plan),
        subtitle=f"{src}{w.model}, batch {w.batch_size}, {shape}, {w.precision}"
        + (
            f", {len(plan.evidence) - 1} measured evidence item(s)"
            if len(plan.evidence) > 1
            else ", predictions only"
        ),
    )
    doc.add(Heading("Fit"))
    _fit(doc, plan)
    _diagnosis(doc, plan)
    _techniques(doc, plan)
    _config(doc, plan)
    _memory(doc, plan)
    _scaling(doc, plan)
    _tools(doc, plan)
    _hardware(doc, plan)
    doc.add(*plan_charts(plan))
    if plan.notes:
        doc.add(Heading("Notes"), Bullets(plan.notes, "muted"))
    return doc


def render(console: Console, plan: Plan) -> None:
    """Print the plan on a Rich console."""
    terminal.render(console, plan_document(plan))


def markdown(plan: Plan) -> str:
    """The plan as Markdown."""
    from gpuwise.report import markdown as md

    return md.render(plan_document(plan))
