"""Reports of a CostEstimate and of a cost comparison across GPUs (one document, every format)."""

from __future__ import annotations

from gpuwise.perf.cost import BreakEven, CostEstimate, GpuCostRow, ServingCost
from gpuwise.perf.prediction import Bound, PerfPrediction
from gpuwise.report.document import Chart, Document, Heading, KeyFigures, Note, Series, Table
from gpuwise.report.units import duration as fmt_duration
from gpuwise.report.units import num as _num
from gpuwise.report.units import tokens as _tokens
from gpuwise.report.units import usd as _usd

__all__ = [
    "BOUND_TEXT",
    "SHORT_BOUND",
    "break_even_rows",
    "comparison_document",
    "cost_document",
    "cost_rows",
    "cost_time_chart",
    "energy_rows",
    "recommended",
    "speed_rows",
]

BOUND_TEXT: dict[Bound, str] = {
    "compute": "compute",
    "memory_bandwidth": "memory bandwidth",
    "communication": "communication",
    "host": "host / kernel launches",
}


def speed_rows(p: PerfPrediction) -> list[tuple[str, str]]:
    """The speed lines shared by terminal and Markdown."""
    rows = [("bound by", BOUND_TEXT[p.bound])]
    if p.training:
        t = p.training
        unit = p.throughput_unit
        rows += [
            ("step time", fmt_duration(p.step_time_s)),
            (f"{unit} (all GPUs)", _num(p.tokens_per_s)),
            (f"{unit} per GPU", _num(p.tokens_per_s_per_gpu)),
            ("MFU", _mfu_text(p)),
            (
                "compute / memory / exposed comm",
                f"{fmt_duration(t.compute_s)} / {fmt_duration(t.memory_s)} / "
                f"{fmt_duration(t.tp_comm_s + t.dp_exposed_s)}",
            ),
        ]
        if t.pp > 1:
            rows.append(("pipeline bubble", f"{100 * t.bubble_fraction:.0f} %"))
    elif p.inference:
        i = p.inference
        rows += [
            ("time to first token", fmt_duration(i.ttft_s)),
            ("time per output token", f"{i.tpot_s * 1000:,.1f} ms at batch {i.batch}"),
            ("output tokens/s (all GPUs)", _num(p.tokens_per_s)),
            (
                "max concurrency (KV cache)",
                f"{i.max_concurrency:,} sequences of {i.prompt_tokens + i.output_tokens:,} tokens",
            ),
            ("decode turns compute-bound at", f"batch {i.decode_compute_bound_batch:,.0f}"),
        ]
    else:
        rows += [
            ("throughput", f"{p.samples_per_s:,.1f} samples/s"),
            ("time per batch", fmt_duration(p.step_time_s)),
        ]
    return rows


def _mfu_text(p: PerfPrediction) -> str:
    """MFU against the dense BF16 peak (PaLM convention), the compute dtype's own figure beside it."""
    text = f"{p.mfu_pct:.1f} % of the {p.mfu_reference_dtype} dense peak"
    if p.mfu_compute_dtype_pct is not None:
        text += f" ({p.mfu_compute_dtype_pct:.1f} % of the {p.compute_dtype} peak)"
    return text


def cost_rows(c: CostEstimate) -> list[tuple[str, str]]:
    """(label, value) rows of a cost estimate: $/GPU-hour and its origin, $/hour, the training run
    (time, $, $ per 1B tokens) or serving ($ per 1M tokens)."""
    rows = [
        ("$/GPU-hour", f"{_usd(c.price.usd_per_gpu_hour)} ({c.price.origin})"),
        (f"$/hour ({c.num_gpus} GPU{'s' if c.num_gpus > 1 else ''})", _usd(c.usd_per_hour)),
    ]
    if c.training:
        t = c.training
        images = c.perf.throughput_unit == "images/s"
        if images:
            rows.append(("$ per 1M training images", _usd(t.usd_per_billion_tokens / 1000, 3)))
        else:
            rows.append(("$ per 1B training tokens", _usd(t.usd_per_billion_tokens)))
        if t.train_tokens is not None:
            what = "images" if images else "tokens"
            rows += [
                (
                    "run",
                    f"{_tokens(t.train_tokens)} {what} ({t.epochs:g} epoch{'s' if t.epochs != 1 else ''})",
                ),
                ("run time", fmt_duration(t.run_time_s or 0.0)),
                ("GPU-hours", _num(t.gpu_hours, "{:,.1f}")),
                ("run cost", _usd(t.run_cost_usd)),
            ]
        else:
            rows.append(
                (
                    "run cost",
                    "set train_tokens (images for vision) and epochs in the workload for a run total",
                )
            )
    if c.serving and c.perf.throughput_unit == "images/s":  # vision inference: the counts are images
        s = c.serving
        rows += [
            ("utilization", f"{s.utilization_pct:g} % of paid hours"),
            ("$ per 1M images", _usd(s.usd_per_million_output_tokens, 3)),
            ("reserved, per month", _usd(s.monthly_cost_usd)),
            ("capacity, per month", f"{_tokens(s.monthly_token_capacity)} images"),
        ]
    elif c.serving:
        rows += _llm_serving_rows(c.serving)
    return rows


def _llm_serving_rows(s: ServingCost) -> list[tuple[str, str]]:
    """What was priced (the deployment at the demand, or the GPUs at their concurrency), its bill and
    $ per 1M tokens: the figures `plan` shows for the same workload."""
    rows = [("priced", s.basis_label or s.basis)]
    if s.basis != "demand":
        rows.append(("busy share", f"{s.utilization_pct:g} % of the held hours"))
    p = s.token_prices
    if p:
        rows += [
            ("$ per 1M input tokens", _usd(p["usd_per_million_input"], 3) + " (bill split by GPU time)"),
            ("$ per 1M output tokens", _usd(p["usd_per_million_output"], 3) + " (bill split by GPU time)"),
        ]
    rows += [
        ("$ per 1M tokens (blended)", _usd(s.usd_per_million_tokens, 3)),
        (
            "per month",
            f"{_usd(s.monthly_cost_usd)} ({s.total_gpus} GPU(s) × {s.held_hours_per_month:,.0f} h held)",
        ),
        ("tokens per month", f"{_tokens(s.monthly_token_capacity)} (prompt + output)"),
    ]
    return rows


def energy_rows(c: CostEstimate) -> list[tuple[str, str]]:
    """(label, value) rows of the energy estimate: GPU power (W), kWh and $ of electricity,
    facility overhead; one row saying so when the catalog has no TDP."""
    e = c.energy
    if e.tdp_w is None:
        return [("energy", "no TDP in the catalog")]
    rows = [
        (
            "GPU power",
            f"{e.gpu_power_w:,.0f} W ({c.num_gpus} × TDP {e.tdp_w:,.0f} W, busy {e.utilization_pct:g} %, "
            "idle draw otherwise)",
        ),
        ("host power", f"{e.host_power_w:,.0f} W (CPUs, memory, network, fans)"),
        ("node at the wall", f"{e.facility_power_w:,.0f} W (PUE {e.pue:g})"),
    ]
    if c.training and c.training.energy_kwh is not None:
        rows.append(
            (
                "energy for the run",
                f"{c.training.energy_kwh:,.0f} kWh ≈ {_usd(c.training.energy_kwh * e.usd_per_kwh)}"
                f" at ${e.usd_per_kwh:.3f}/kWh",
            )
        )
    elif c.serving:
        rows.append(
            (
                "energy per month",
                f"{c.serving.energy_kwh_per_month:,.0f} kWh ≈ "
                f"{_usd(c.serving.energy_kwh_per_month * e.usd_per_kwh)} at ${e.usd_per_kwh:.3f}/kWh",
            )
        )
    else:
        rows.append(("energy per hour", f"{e.kwh_per_hour:,.2f} kWh"))
    return rows


def break_even_rows(b: BreakEven) -> list[tuple[str, str]]:
    """(label, value) rows of self-hosting against an API: prices, the break-even volume and the
    deployment's capacity (tokens per month), and the verdict."""
    return [
        ("API price", f"{_usd(b.api_usd_per_million_tokens, 3)} per 1M tokens"),
        ("self-hosted (reserved)", f"{_usd(b.self_hosted_usd_per_month)} per month"),
        ("break-even volume", f"{_tokens(b.break_even_tokens_per_month)} tokens/month"),
        ("deployment capacity", f"{_tokens(b.capacity_tokens_per_month)} tokens/month"),
        ("verdict", b.verdict),
    ]


def _title(c: CostEstimate) -> str:
    w = c.perf.workload
    return f"{w['model']} · {w['task']} · {w['precision']} on {c.num_gpus}× {c.gpu_name}"


def _kv(title: str, rows: list[tuple[str, str]]) -> list[Heading | Table]:
    return [Heading(title, 3), Table(["", ""], [list(r) for r in rows], header=False)]


def cost_document(c: CostEstimate) -> Document:
    """`gpuwise cost`: key figures, the cost, energy and break-even rows, and the assumptions."""
    doc = Document(f"Cost: {_title(c)}")
    figures = [("$/hour", _usd(c.usd_per_hour)), ("bound by", BOUND_TEXT[c.perf.bound])]
    if c.training and c.training.run_cost_usd is not None:
        figures.insert(0, ("run cost", _usd(c.training.run_cost_usd)))
    if c.serving and c.perf.throughput_unit == "images/s":  # vision inference: the counts are images
        figures.insert(0, ("$ per 1M images", _usd(c.serving.usd_per_million_output_tokens, 3)))
    elif c.serving:
        figures.insert(0, ("$ per 1M tokens", _usd(c.serving.usd_per_million_tokens, 3)))
        figures.insert(1, ("$/month", _usd(c.serving.monthly_cost_usd)))
    at_demand = c.serving is not None and c.serving.basis == "demand"
    if at_demand:  # the per-replica roofline at batch 1 is not the deployment: its latency is shown below
        figures = [f for f in figures if f[0] != "bound by"]
    doc.add(KeyFigures(figures))
    if not at_demand:
        doc.add(*_kv("Speed (predicted)", speed_rows(c.perf)))
    doc.add(*_kv("Cost", cost_rows(c)))
    doc.add(*_kv("Energy", energy_rows(c)))
    if c.break_even:
        doc.add(*_kv("API vs self-hosted", break_even_rows(c.break_even)))
    doc.add(*(Note(f"• {line}", "warn") for line in c.notes + c.perf.notes))
    doc.add(*(Note(f"• {line}") for line in c.perf.assumptions))
    return doc


# Keyed by Bound; GpuCostRow.bound is typed str, so the lookup keeps a plain str key.
SHORT_BOUND: dict[str, str] = {
    "compute": "compute",
    "memory_bandwidth": "memory",
    "communication": "comm",
    "host": "host",
}


def _comparison_columns(training: bool, with_run: bool, vision: bool = False) -> list[str]:
    speed = "img/s" if vision else ("tok/s" if training else "out tok/s")
    latency = "step" if training else ("per batch" if vision else "TPOT")
    per = "$/Bimg" if vision else "$/Btok"
    money = (["run $"] if with_run else []) + [per] if training else (["$/Mimg"] if vision else ["$/Mtok"])
    batch = [] if training or vision else ["batch"]
    return ["GPU", "fits", "$/h", *batch, speed, latency, "bound", *money]


def _comparison_cells(r: GpuCostRow, training: bool, with_run: bool, vision: bool = False) -> list[str]:
    fits = {True: "yes", False: "no", None: "?"}[r.fits]
    if r.tokens_per_s is None or r.step_time_s is None:
        latency = "—"
    else:
        latency = f"{r.tpot_s * 1000:,.1f} ms" if r.tpot_s is not None else fmt_duration(r.step_time_s)
    if training:
        money = ([_usd(r.run_cost_usd)] if with_run else []) + [_usd(r.usd_per_billion_tokens)]
    else:
        money = [_usd(r.usd_per_million_tokens, 3)]
    batch = [] if training or vision else [_num(r.batch)]
    return [
        r.gpu,
        fits,
        _usd(r.usd_per_gpu_hour),
        *batch,
        _num(r.tokens_per_s),
        latency,
        SHORT_BOUND.get(r.bound or "", "—"),
        *money,
    ]


def recommended(rows: list[GpuCostRow], training: bool) -> GpuCostRow | None:
    """The cheapest GPU that fits (per token or per image): what the comparison marks."""

    def price(r: GpuCostRow) -> float | None:
        return r.usd_per_billion_tokens if training else r.usd_per_million_tokens

    fitting = [r for r in rows if r.fits is not False and price(r) is not None]
    return min(fitting, key=lambda r: price(r) or 0.0, default=None)


def cost_time_chart(rows: list[GpuCostRow], training: bool, vision: bool = False) -> Chart | None:
    """GPUs on cost against time, the recommended one marked (None when too few GPUs have both).

    x: step time (training, vision) or time per output token (serving), in ms; y: $ per 1B training
    tokens (or images) or $ per 1M served tokens."""
    per = ("$ per 1B images" if vision else "$ per 1B tokens") if training else "$ per 1M tokens"
    points = [
        r
        for r in rows
        if r.fits is not False and r.step_time_s is not None and _price(r, training) is not None
    ]
    if len(points) < 2:
        return None
    best = recommended(points, training)
    return Chart(
        "scatter",
        "GPUs on cost against time",
        [r.gpu for r in points],
        [Series(per, [_price(r, training) or 0.0 for r in points])],
        x_label=("step time" if training or vision else "time per output token") + " (ms)",
        y_label=per,
        x=[_time_ms(r, training) for r in points],
        marked=[i for i, r in enumerate(points) if r is best],
        mark_label="recommended",
        description="Each GPU that fits, by its predicted time and cost; lower left is better"
        + (f"; the cheapest is {best.gpu}." if best else "."),
        in_text=False,
    )


def _price(r: GpuCostRow, training: bool) -> float | None:
    """$ per 1B training tokens (or images) when training, else $ per 1M served tokens."""
    return r.usd_per_billion_tokens if training else r.usd_per_million_tokens


def _time_ms(r: GpuCostRow, training: bool) -> float:
    """Time per output token (serving, when known), else step time, in ms."""
    return (r.tpot_s if r.tpot_s is not None and not training else r.step_time_s or 0.0) * 1000


def comparison_document(rows: list[GpuCostRow], title: str, training: bool, vision: bool = False) -> Document:
    """`gpuwise cost --all-gpus`: every GPU on the same workload, the cheapest that fits marked,
    and the cost-against-time chart."""
    with_run = any(r.run_cost_usd is not None for r in rows)
    doc = Document(title)
    best = recommended(rows, training)
    if best is not None:
        doc.add(KeyFigures([("cheapest that fits", best.gpu), ("$/h", _usd(best.usd_per_gpu_hour))]))
    cols = _comparison_columns(training, with_run, vision)
    doc.add(
        Table(
            cols,
            [_comparison_cells(r, training, with_run, vision) for r in rows],
            align="".join("l" if c in ("GPU", "bound") else "r" for c in cols),
            row_styles=["strong" if r is best else "muted" if r.fits is False else "" for r in rows],
        )
    )
    chart = cost_time_chart(rows, training, vision)
    if chart is not None:
        doc.add(chart)
    doc.add(
        Note(
            "Same GPU count and parallelism on every GPU; $/h per GPU; $/Mtok per 1M prompt + output "
            "tokens, $/Btok per 1B training tokens. '—' = no verified price (pass --usd-per-hour); "
            "fits '?' = memory not checked."
        )
    )
    return doc
