"""A load test as a `Document`: the max rate meeting the SLO, one row per load level, errors by kind."""

from __future__ import annotations

from gpuwise.loadtest.types import LevelSummary, LoadtestResult, RateSearch
from gpuwise.report.document import Block, Bullets, Chart, Document, Paragraph, Series, Style, Table

__all__ = ["document", "latency_chart", "levels_table", "prediction_table"]

_TOKEN_SOURCE = {
    "usage": "token counts from the server's `usage`",
    "tokenizer": "token counts from --tokenizer (the server sent no `usage`)",
    "chunks": "output tokens counted as streamed chunks (the server sent no `usage`)",
    "mixed": "token counts from `usage` where the server sent it, else --tokenizer or streamed chunks",
    "none": "no successful request",
}


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:,.0f}"


def _pair(lv: LevelSummary, metric: str) -> str:
    return f"{_ms(lv.pct(metric, 50))} / {_ms(lv.pct(metric, 99))}"


def _level_name(lv: LevelSummary) -> str:
    if lv.mode == "concurrency":
        return f"{lv.target:g} in flight"
    return f"{lv.target:.3g} req/s"


def _slo_cell(lv: LevelSummary) -> str:
    return "" if lv.slo_met is None else ("met" if lv.slo_met else "missed")


def levels_table(levels: list[LevelSummary], caption: str = "") -> Table:
    """One row per load level: ok/sent, request and token throughput (per s), TTFT/TPOT/ITL
    percentiles (ms), goodput and the SLO verdict when one was given."""
    with_slo = any(lv.slo_met is not None for lv in levels)
    columns = [
        "load",
        "ok/sent",
        "req/s",
        "out tok/s",
        "TTFT ms p50/p99",
        "TPOT ms p50/p99",
        "ITL ms p50/p99",
    ]
    columns += ["e2e ms p50/p99"] + (["goodput req/s", "SLO"] if with_slo else [])
    rows, styles = [], []
    for lv in levels:
        row = [
            _level_name(lv),
            f"{lv.requests_ok}/{lv.requests_sent}",
            f"{lv.request_throughput_per_s:.2f}",
            f"{lv.output_token_throughput_per_s:,.0f}",
            _pair(lv, "ttft"),
            _pair(lv, "tpot"),
            _pair(lv, "itl"),
            _pair(lv, "e2e"),
        ]
        if with_slo:
            row += [f"{lv.goodput_per_s or 0:.2f}", _slo_cell(lv)]
        rows.append(row)
        style: Style = "" if lv.slo_met is None else ("good" if lv.slo_met else "warn")
        styles.append(style)
    return Table(
        columns, rows, caption=caption, align="lrrrrrrrrl" if with_slo else "lrrrrrrr", row_styles=styles
    )


def _misses(levels: list[LevelSummary]) -> list[Block]:
    items = [f"{_level_name(lv)}: " + "; ".join(lv.slo_failures) for lv in levels if lv.slo_failures]
    return [Paragraph("SLO missed:", "warn"), Bullets(items)] if items else []


def _errors(levels: list[LevelSummary]) -> list[Block]:
    items = []
    for lv in levels:
        if lv.errors:
            kinds = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(lv.errors.items()))
            items.append(f"{_level_name(lv)}: {kinds}")
    return [Paragraph("Failed requests (counted, never fatal):", "warn"), Bullets(items)] if items else []


def _gap(value: float | None) -> str:
    return "—" if value is None else f"{value:+.0f} %"


def prediction_table(prediction: dict) -> Table:
    """Each level next to gpuwise's model at its lengths and requests in flight (no queueing modelled)."""
    rows = []
    for r in prediction["levels"]:
        rows.append(
            [
                f"{r['concurrency']} in flight",
                f"{_ms(r['measured_ttft_p50_s'])} / {_ms(r['predicted_ttft_p50_s'])}",
                _gap(r["ttft_gap_pct"]),
                f"{_ms(r['measured_tpot_p50_s'])} / {_ms(r['predicted_tpot_p50_s'])}",
                _gap(r["tpot_gap_pct"]),
                f"{r['measured_output_tokens_per_s']:,.0f} / {r['predicted_output_tokens_per_s']:,.0f}",
                _gap(r["output_tokens_gap_pct"]),
            ]
        )
    gpus = f"{prediction['num_gpus']} × {prediction['gpu']}"
    engine = f", {prediction['engine']}" if prediction["engine"] else ""
    return Table(
        ["load", "TTFT p50 ms measured / predicted", "gap", "TPOT p50 ms", "gap", "out tok/s", "gap"],
        rows,
        caption=f"measured vs gpuwise's prediction for {prediction['workload']} on {gpus}{engine}",
        align="lrrrrrr",
    )


def latency_chart(levels: list[LevelSummary]) -> Chart | None:
    """TTFT and TPOT percentiles against the load: where the knee is, at a glance."""
    levels = sorted((lv for lv in levels if lv.pct("ttft", 50) is not None), key=lambda lv: lv.target)
    if len(levels) < 2:
        return None
    series = [
        Series(f"{metric.upper()} p{q}", [1000 * (lv.pct(metric, q) or 0.0) for lv in levels])
        for metric in ("ttft", "tpot")
        for q in (50, 99)
    ]
    by_rate = levels[0].mode != "concurrency"
    missed = [i for i, lv in enumerate(levels) if lv.slo_met is False]
    return Chart(
        "line",
        "Latency percentiles against the load",
        [_level_name(lv) for lv in levels],
        series,
        x_label="offered load (" + ("requests/s" if by_rate else "requests in flight") + ")",
        y_label="latency (ms)",
        marked=missed,
        mark_label="SLO missed",
        description="TTFT and TPOT at p50 and p99 for each load level of the test; levels that missed "
        "the SLO are marked.",
        in_text=False,
    )


def _max_rate_line(s: RateSearch, slo: str) -> str:
    """The answer of a finished search: the rate offered (what the seeded schedules sent) and its interval."""
    assert s.max_rate_per_s is not None
    offered = s.offered_rate_per_s or s.max_rate_per_s
    line = f"Max rate meeting the SLO ({slo}): {offered:.3g} req/s offered (nominal {s.max_rate_per_s:.3g})"
    if s.ci_low_per_s is not None or s.ci_high_per_s is not None:
        low = "—" if s.ci_low_per_s is None else f"{s.ci_low_per_s:.3g}"
        high = "—" if s.ci_high_per_s is None else f"{s.ci_high_per_s:.3g}"
        line += f"; 95 % interval {low}–{high} req/s"
    return line + f" ({len(s.probes)} probes, {s.repeats} seed{'s' if s.repeats > 1 else ''} per rate)."


def document(result: LoadtestResult) -> Document:
    """`gpuwise loadtest`: the levels (or the rate search's probes), the highest rate meeting the
    SLO, and where token counts came from."""
    levels = result.search.probes if result.search else result.levels
    sources = {lv.token_source for lv in levels}
    source = sources.pop() if len(sources) == 1 else "mixed"
    subtitle = (
        f"model {result.model} · /v1/{'chat/completions' if result.endpoint == 'chat' else 'completions'}"
    )
    subtitle += (
        f" · {'streaming' if result.stream else 'not streaming'} · {_TOKEN_SOURCE.get(source, source)}"
    )
    doc = Document(f"Load test of {result.url}", subtitle=subtitle)
    if result.search is not None:
        s, slo = result.search, result.slo.text() if result.slo else ""
        if s.interrupted:
            found = "none yet" if s.max_rate_per_s is None else f"{s.max_rate_per_s:.3g} req/s met it"
            doc.add(
                Paragraph(
                    f"Search interrupted before its answer (SLO {slo}); of the finished probes, {found}.",
                    "warn",
                )
            )
        elif s.max_rate_per_s is None:
            doc.add(Paragraph(f"No probed rate met the SLO ({slo}), not even {s.low_per_s:g} req/s.", "bad"))
        elif s.bounded_by_high:
            doc.add(
                Paragraph(
                    f"The highest rate tried, {s.high_per_s:g} req/s, meets the SLO ({slo}): "
                    "the maximum is higher (raise --rate-range).",
                    "strong",
                )
            )
        else:
            doc.add(Paragraph(_max_rate_line(s, slo), "strong"))
        arrivals = f"{s.probes[0].mode} arrivals" if s.probes else ""
        doc.add(levels_table(sorted(s.probes, key=lambda p: p.target), f"the probes, by rate ({arrivals})"))
    else:
        mode = result.levels[0].mode if result.levels else "concurrency"
        caption = "" if mode == "concurrency" else f"{mode} arrivals"
        doc.add(levels_table(result.levels, caption), *_misses(result.levels))
    chart = latency_chart(levels)
    if chart is not None:
        doc.add(chart)
    doc.add(*_errors(levels))
    if result.prediction:
        doc.add(prediction_table(result.prediction))
    for warning in result.warnings:
        doc.add(Paragraph(f"Warning: {warning}.", "warn"))
    if result.interrupted:
        doc.add(Paragraph("Interrupted: these are the requests that finished before Ctrl-C.", "warn"))
    notes = "TTFT: send to first generated text; TPOT: (e2e − TTFT) / (output tokens − 1); ITL: gap between"
    notes += " chunks (vLLM benchmark_serving / genai-perf definitions, docs/loadtest.md)."
    if result.run_id is not None:
        notes += (
            f" Saved as run {result.run_id} (`gpuwise runs list`); "
            f"`gpuwise plan WORKLOAD --evidence {result.run_id}` calibrates a serving plan with it."
        )
    doc.add(Paragraph(notes, "muted"))
    return doc
