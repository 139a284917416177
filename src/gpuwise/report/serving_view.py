"""The serving plan as a Document: the answer first (cheapest deployment meeting the SLO, replicas,
monthly cost), then the diagnosis, the options per GPU, and each technique against the SLO."""

from __future__ import annotations

from rich.console import Console

from gpuwise.perf.kv_capacity import KvCapacity
from gpuwise.plan.serving import ServingPlan, ServingTechnique
from gpuwise.report import terminal
from gpuwise.report.document import Bars, Bullets, Code, Document, Heading, Paragraph, Style, Table
from gpuwise.report.findings import findings_blocks
from gpuwise.report.units import duration, ms
from gpuwise.report.units import usd as _usd
from gpuwise.serving.economics import TokenPrices
from gpuwise.serving.evaluate import Deployment

__all__ = ["answer", "figures_lines", "kv_line", "price_line", "render", "serving_document"]


def _ms(seconds: float) -> str:
    """Latencies: whole milliseconds below 10 s (an SLO is set in ms), seconds above."""
    return ms(seconds, 0) if seconds < 10 else duration(seconds)


def kv_line(kv: KvCapacity) -> str:
    """The one wording of KV capacity, shared by memory, cost and plan."""
    return (
        f"KV cache holds {kv.max_sequences:,} sequences of {kv.tokens_per_sequence:,} tokens "
        f"({kv.tokens:,} tokens in {kv.blocks:,} blocks of {kv.block_size}, "
        f"gpu_memory_utilization {kv.gpu_memory_utilization:.2f})"
    )


def price_line(p: TokenPrices) -> str:
    """The one wording of $ per 1M tokens, shared by cost and plan."""
    return (
        f"{_usd(p.usd_per_million_input, 3)} per 1M input tokens, {_usd(p.usd_per_million_output, 3)} "
        f"per 1M output tokens ({_usd(p.usd_per_million_blended, 3)} per 1M tokens blended; "
        f"{p.input_share:.0%} of GPU time is prefill)"
    )


def figures_lines(kv: KvCapacity, at_demand: Deployment | None) -> list[str]:
    """What ``memory`` and ``cost`` print for a serving workload: the same lines as the plan."""
    lines = [kv_line(kv)]
    if at_demand is not None and at_demand.latency is not None:
        lines.append(
            f"at {at_demand.rate_rps:,.2f} req/s on {at_demand.where}: {at_demand.replicas} replica(s), "
            f"{_latency(at_demand)}" + ("" if at_demand.meets_slo else " (misses the SLO)")
        )
        if at_demand.prices is not None:
            lines.append(price_line(at_demand.prices) + f"; {_usd(at_demand.monthly_usd)}/month")
    elif at_demand is not None:
        lines.append(f"at {at_demand.rate_rps:,.2f} req/s on {at_demand.gpu}: {at_demand.note}")
    return lines


def _latency(d: Deployment) -> str:
    if d.latency is None:
        return "—"
    lat = d.latency
    return f"TTFT p99 {_ms(lat.ttft_s[99])} · TPOT p99 {_ms(lat.tpot_s[99])} · e2e p99 {_ms(lat.e2e_s[99])}"


def answer(plan: ServingPlan) -> list[Paragraph | Bullets]:
    """The serving plan's answer first: demand and SLO, then the cheapest deployment that meets it
    (or why none does)."""
    slo = ", ".join(f"{k} ≤ {_ms(v)}" for k, v in plan.slo.items())
    blocks: list[Paragraph | Bullets] = [
        Paragraph(f"Demand {plan.rate_rps:,.2f} req/s · SLO {slo} · engine {plan.engine}")
    ]
    best = plan.cheapest
    if best is None:
        blocks.append(Paragraph("No priced catalog GPU meets the SLO at this rate.", "bad"))
    else:
        blocks.append(
            Paragraph(
                f"Cheapest meeting the SLO: {best.where} = {best.replicas} replica(s), "
                f"{best.total_gpus} GPU(s), "
                f"{_usd(best.monthly_usd)}/month ({best.prices.gpu_hours_per_month:,.0f} GPU-hours)"
                if best.prices
                else f"Cheapest meeting the SLO: {best.where}",
                "good",
            )
        )
        items = [f"at the rate: {_latency(best)}"]
        if best.prices:
            items.append(price_line(best.prices))
        if best.kv:
            items.append(kv_line(best.kv))
        blocks.append(Bullets(items))
    combo = plan.combined
    if combo is not None and combo.best is not None and combo.verdict == "recommended":
        blocks.append(
            Paragraph(
                f"With {combo.title}: {combo.best.where} = {combo.best.replicas} replica(s), "
                f"{_usd(combo.monthly_usd)}/month, {_latency(combo.best)}",
                "good",
            )
        )
    return blocks


def _option_row(d: Deployment) -> list[str]:
    return [
        f"{d.gpu} × {d.gpus_per_node}",
        str(d.tp),
        f"{d.goodput_rps_per_replica:,.2f}",
        str(d.replicas),
        str(d.total_gpus),
        _ms(d.latency.ttft_s[99]) if d.latency else "—",
        _ms(d.latency.tpot_s[99]) if d.latency else "—",
        _usd(d.monthly_usd),
        _usd(d.prices.usd_per_million_input, 3) if d.prices else "—",
        _usd(d.prices.usd_per_million_output, 3) if d.prices else "—",
    ]


_OPTION_COLUMNS = [
    "GPU × per node",
    "tp",
    "goodput req/s per replica",
    "replicas",
    "GPUs",
    "TTFT p99",
    "TPOT p99",
    "$/month",
    "$/1M in",
    "$/1M out",
]

_VERDICT_STYLE: dict[str, Style] = {
    "recommended": "good",
    "optional": "",
    "in-use": "good",
    "not-needed": "muted",
    "not-recommended": "muted",
    "breaks-slo": "bad",
}


def _technique_row(t: ServingTechnique) -> list[str]:
    cost = _usd(t.monthly_usd) if t.monthly_usd is not None else "—"
    saving = (
        f"{t.saving_pct:+.0f} %".replace("+", "−", 1)
        if t.saving_pct and t.saving_pct > 0
        else (f"+{-t.saving_pct:.0f} %" if t.saving_pct and t.saving_pct < 0 else "—")
    )
    gain = "—" if t.goodput_gain_pct is None else f"{round(t.goodput_gain_pct):+d} %".replace("+0 ", "±0 ")
    return [t.title, gain, cost, saving, f"{t.verdict} (quality risk: {t.risk})", t.why]


def _measured(plan: ServingPlan) -> str:
    ev = plan.evidence[0]
    load = ev.serving
    lat = load.serving_latency_s or {}
    parts = [
        f"{ev.label}, {load.serving_level}, {load.serving_requests_ok}/{load.serving_requests} requests ok"
    ]
    parts += [
        f"{k.replace('_', ' ')} {_ms(lat[k])}" for k in ("ttft_p50", "ttft_p99", "tpot_p50") if k in lat
    ]
    if load.serving_request_throughput_rps is not None:
        parts.append(f"{load.serving_request_throughput_rps:,.2f} req/s done")
    return " · ".join(parts)


def serving_document(plan: ServingPlan) -> Document:
    """`gpuwise plan --rate`: the answer, the calibration used, options per GPU type, techniques
    that lower the cost, and what could not be priced."""
    w = plan.workload
    doc = Document(f"gpuwise plan: {w['model']} serving at {plan.rate_rps:,.2f} req/s")
    blocks = answer(plan)
    cal = plan.calibration
    if cal is not None:  # every figure below is at the calibrated speed: say so before them
        blocks.insert(1, Paragraph(cal.line[0].upper() + cal.line[1:], "warn" if cal.clamped else ""))
    doc.add(*blocks)
    doc.blocks.append(Heading("1. Diagnosis"))
    if plan.evidence:
        doc.blocks.append(Paragraph("Measured (" + _measured(plan) + "):", "muted"))
        doc.add(*findings_blocks(plan.findings, measured=True))
        doc.blocks.append(Paragraph("Simulated at the demand:", "muted"))
    doc.blocks.append(Bullets(list(plan.diagnosis)))
    cur = plan.current
    if cur.fits and cur.latency is not None:
        doc.blocks.append(
            Paragraph(
                f"As configured ({cur.gpus_per_node} × {cur.gpu}, tp {cur.tp}): {cur.replicas} replica(s), "
                f"{_latency(cur)}, {_usd(cur.monthly_usd)}/month"
                + ("" if cur.meets_slo else " — misses the SLO"),
                "" if cur.meets_slo else "warn",
            )
        )
    if cur.kv:
        doc.blocks.append(Paragraph(kv_line(cur.kv), "muted"))
    doc.blocks.append(Heading("2. Techniques against the SLO"))
    doc.blocks.append(
        Paragraph(
            "Each row re-simulates the workload with the change on the cheapest GPU type (node sizes up to "
            "its own, every tp); goodput is per replica at the same tp, cost is the cheapest deployment "
            "that still meets the SLO.",
            "muted",
        )
    )
    doc.blocks.append(
        Table(
            ["Technique", "Goodput", "$/month", "Saving", "Verdict", "Why"],
            [_technique_row(t) for t in plan.techniques],
            row_styles=[_VERDICT_STYLE[t.verdict] for t in plan.techniques],
        )
    )
    doc.blocks.append(Heading("3. Cheapest deployment per GPU type meeting the SLO"))
    if plan.options:
        doc.blocks.append(
            Table(_OPTION_COLUMNS, [_option_row(d) for d in plan.options[:12]], align="lrrrrrrrrr")
        )
    if plan.unpriced:
        doc.blocks.append(
            Paragraph(
                "Also meet the SLO, no verified price in the catalog: "
                + ", ".join(
                    f"{d.replicas} × {d.gpu} (tp {d.tp}, {d.total_gpus} GPUs)" for d in plan.unpriced
                ),
                "muted",
            )
        )
    _config_blocks(doc, plan)
    doc.blocks.append(
        Paragraph(
            f"{plan.deployments_evaluated} deployments simulated in {plan.seconds:.1f} s. "
            + " · ".join(plan.notes),
            "muted",
        )
    )
    return doc


def _config_blocks(doc: Document, plan: ServingPlan) -> None:
    """4. the recommended deployment's VRAM per GPU and launch commands; 5. the tools to use."""
    cfg = plan.config
    if cfg is None:
        return
    changes = ", ".join(f"{k} {v}" for k, v in cfg.changes.items()) or "the workload as given"
    doc.blocks.append(Heading("4. Configuration"))
    doc.blocks.append(
        Paragraph(
            f"{cfg.where}: {cfg.replicas} replica(s), {cfg.total_gpus} GPU(s), with {changes}. "
            f"Memory of each GPU of a replica ({cfg.kv_max_sequences} sequences fit in its KV cache):"
        )
    )
    gib = 2**30
    used = sum(p.bytes_per_gpu for p in cfg.vram)
    doc.blocks.append(
        Bars(
            [(p.name, p.bytes_per_gpu, f"{p.bytes_per_gpu / gib:,.1f} GiB") for p in cfg.vram],
            total=max(cfg.capacity_bytes_per_gpu, used),
            total_label=f"{used / gib:,.1f} of {cfg.capacity_bytes_per_gpu / gib:,.1f} GiB",
            caption="; ".join(f"{p.name}: {p.note}" for p in cfg.vram),
        )
    )
    for engine, command in cfg.commands.items():
        doc.blocks.append(Code(command, label=engine, language="bash"))
    if plan.tools:
        doc.blocks.append(Heading("5. Tools"))
        doc.blocks.append(Bullets([f"{t.name}: {t.why}" for t in plan.tools]))


def render(console: Console, plan: ServingPlan) -> None:
    """Print the serving plan on a Rich console."""
    terminal.render(console, serving_document(plan))
