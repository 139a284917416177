"""The report of a `gpuwise tune` session: the winner (in the script's terms), the ranking, every trial."""

from __future__ import annotations

from gpuwise.diagnose import thresholds as T
from gpuwise.report.document import Code, Document, Heading, Headline, Note, Paragraph, Table
from gpuwise.report.units import gib, num
from gpuwise.tune.result import TuneResult

__all__ = ["METRIC_LABEL", "VERDICT_STYLE", "trials_table", "tune_document"]

METRIC_LABEL = {"samples_per_s": "samples/s", "steps_per_s": "steps/s"}
VERDICT_STYLE = {
    "faster": "good",
    "rejected": "bad",
    "failed": "bad",
    "slower": "warn",
    "near_memory_limit": "warn",
}


def _rate(value: float | None) -> str:
    return num(value, "{:,.2f}" if value is not None and value < 100 else "{:,.0f}")


def tune_document(result: TuneResult) -> Document:
    """`gpuwise tune`: the winning settings and their gain over the baseline, every trial, and what
    to paste."""
    doc = Document("gpuwise tune", subtitle=result.command)
    unit = METRIC_LABEL[result.metric]
    base = result.baseline_value
    w = result.winner
    if w is not None:
        spread = w.config.spread(result.metric)
        doc.add(
            Headline(
                f"{w.config.label}: {_rate(w.config.median(result.metric))} {unit} vs {_rate(base)} "
                f"as written = {w.speedup_x:.2f}× faster",
                "good" if w.beats_spread else "warn",
            ),
            Note(
                (
                    f"median of {len(w.config.trials)} trials (range {_rate(spread[0])}–{_rate(spread[1])}); "
                    if spread
                    else ""
                )
                + (
                    "its slowest trial beat the baseline's fastest"
                    if w.beats_spread
                    else "not repeated enough to separate the gain from noise (see --repeats)"
                )
            ),
            Heading("Winning configuration", 2),
            Paragraph(f"command: {w.command}"),
        )
        if w.code:
            doc.add(Code(w.code, label=w.framework or "PyTorch", language="python"))
    elif base is not None:
        doc.add(Headline(f"no configuration beat the script as written ({_rate(base)} {unit})", "warn"))
    else:
        doc.add(Headline("the command as written produced no measurement", "bad"))
    if result.largest_batch is not None and any(t.spec.role == "batch" for t in result.trials):
        oom = sorted({t.spec.batch for t in result.trials if t.status == "oom" and t.spec.batch is not None})
        doc.add(
            Note(
                f"largest batch that ran (measured): {result.largest_batch}"
                + (f"; {oom[0]} ran out of memory" if oom else "")
            )
        )
    if result.effective_batch is not None:
        doc.add(Note(f"effective batch kept at {result.effective_batch} in every batch trial"))
    if result.simulated:
        doc.add(
            Heading(f"Batch on {result.target_gpu} (simulated: fake-tensor training step)", 2),
            _simulated(result),
        )
    doc.add(Heading("Configurations, ranked", 2), _configs_table(result))
    doc.add(Heading("Trials", 2), trials_table(result))
    overhead = result.tuner_wall_s
    doc.add(
        Note(
            f"{len(result.trials)} trials in {overhead:.0f} s · numerics knobs verified on the "
            f"last {result.loss_steps} losses after warm-up "
            f"(mean and spread, tolerance {result.loss_rtol:.1%})"
            + (f" · saved in {result.store} (tune {result.tune_id})" if result.store else "")
        )
    )
    doc.add(*(Note(n, "warn" if "interrupted" in n else "muted") for n in result.notes))
    return doc


def _configs_table(result: TuneResult) -> Table:
    unit = METRIC_LABEL[result.metric]
    base = result.baseline_value
    rows, styles = [], []
    for c in result.configs:
        median = c.median(result.metric)
        spread = c.spread(result.metric)
        rows.append(
            [
                c.label,
                c.verdict.replace("_", " "),
                _rate(median),
                f"{_rate(spread[0])}–{_rate(spread[1])}"
                if spread and len(c.values(result.metric)) > 1
                else "—",
                f"{median / base:.2f}×" if median and base else "—",
                str(len(c.trials)),
                c.why or "",
            ]
        )
        styles.append(VERDICT_STYLE.get(c.verdict, ""))
    columns = ["configuration", "verdict", f"{unit} (median)", "range", "vs as written", "trials", "why"]
    if not any(row[-1] for row in rows):  # no configuration needs a word: drop the empty column
        columns, rows = columns[:-1], [row[:-1] for row in rows]
    return Table(columns, rows, align="llrrrrl"[: len(columns)], row_styles=styles)  # type: ignore[arg-type]


def trials_table(result: TuneResult) -> Table:
    """One row per trial: role, settings, status, steps/s and samples/s measured, wall time (s), note."""
    rows = []
    for t in result.trials:
        rows.append(
            [
                str(t.spec.index),
                t.spec.role,
                t.spec.label,
                t.status,
                _rate(t.steps_per_s),
                _rate(t.samples_per_s),
                f"{t.wall_s:.1f}" if t.status != "skipped" else "—",
                t.error or "; ".join(t.notes[-1:]),
            ]
        )
    return Table(
        ["#", "role", "settings", "status", "steps/s", "samples/s", "wall s", "note"], rows, align="rlllrrrl"
    )


def _simulated(result: TuneResult) -> Table:
    return Table(
        ["batch", "device total (simulated)", "of", "free", "kept"],
        [
            [
                str(r.batch),
                gib(r.device_total_bytes),
                gib(r.device_memory_bytes),
                f"{r.headroom_pct:.0f} %",
                "yes" if r.kept else f"no (< {T.TUNE_MEMORY_MARGIN_PCT:.0f} % free)",
            ]
            for r in result.simulated
        ],
        align="rrrrl",
    )
