"""Buy vs rent vs API as a `Document`: the verdict, the monthly cost of each option, and the inputs
with their sources (printed by report/terminal.py, markdown.py or html.py)."""

from __future__ import annotations

from gpuwise.perf.tco import Tco, TcoOption
from gpuwise.report.cost_view import _usd  # the report's one $ formatter
from gpuwise.report.document import Block, Bullets, Document, Heading, Paragraph, Style, Table

__all__ = ["blocks", "document", "input_rows", "option_table", "plan_blocks"]

_NAMES = {
    "own": "Buy (own)",
    "on_demand": "Rent on demand",
    "spot": "Rent spot (interruptible)",
    "reserved_1y": "Rent, 1-year reservation",
    "reserved_3y": "Rent, 3-year reservation",
    "api": "Hosted API",
}


def _budget_cell(o: TcoOption) -> str:
    return {True: "within", False: "over", None: "—"}[o.within_budget]


def _style(o: TcoOption, cheapest: TcoOption | None) -> Style:
    if o.monthly_usd is None:
        return "muted"
    if o.within_budget is False:
        return "warn"
    return "good" if o is cheapest else ""


def option_table(t: Tco) -> Table:
    """Buy, rent and API monthly cost ($) of the same work, the cheapest marked, with the budget
    verdict and how each is computed."""
    best = t.cheapest
    return Table(
        ["Option", "$ / month", "Budget", "How"],
        [[_NAMES[o.kind], _usd(o.monthly_usd, 0), _budget_cell(o), o.detail] for o in t.options],
        caption="Monthly cost of the same work",
        align="lrll",
        row_styles=[_style(o, best) for o in t.options],
    )


def input_rows(t: Tco) -> list[list[str]]:
    """The inputs of buy vs rent vs API as [what, value, source] rows: purchase price, power and
    electricity, colocation, utilization, ..."""
    i = t.inputs
    power = (
        f"node of {i.num_gpus} x {i.tdp_w:,.0f} W GPUs ({i.utilization_pct:g} % busy, idle draw otherwise) "
        f"+ host, x PUE {i.pue:g} x {i.held_hours_per_month:,.0f} h x ${i.usd_per_kwh:.3f}/kWh "
        "(perf/data/cost.toml)"
        if i.tdp_w
        else "no TDP in the catalog"
    )
    rows = [
        ["purchase per GPU", _usd(i.purchase_usd_per_gpu, 0), i.purchase_source],
        [
            "amortization",
            f"{i.amortization_months:g} months",
            "amortization_months (default in perf/data/cost.toml)",
        ],
        ["power", _usd(t.own.power_usd, 0) + "/month" if t.own else "—", power],
        ["colocation / ops", _usd(i.ops_usd_per_month, 0) + "/month", i.ops_source],
        ["held hours", f"{i.held_hours_per_month:,.0f} h/month", i.held_detail or "held_hours_per_month"],
        [
            "busy share",
            f"{i.utilization_pct:g} %",
            "the workload's utilization_pct (100 % when not given): power only, not the rent",
        ],
        [
            "monthly budget",
            _usd(i.monthly_budget_usd, 0) if i.monthly_budget_usd is not None else "—",
            "monthly_budget_usd",
        ],
    ]
    return rows


def sensitivity_table(t: Tco) -> Table:
    """Own vs rent at the on-demand price ±30 % and at 0/20/40 % resale: does the verdict hold?"""
    rows = []
    for c in t.rent_sensitivity:
        hours = (
            f"{c.break_even_held_hours_per_month:,.0f} h" if c.break_even_held_hours_per_month else "never"
        )
        rows.append(
            [
                f"on-demand x {c.rent_factor:g} ({_usd(c.usd_per_gpu_hour, 2)}/GPU-h)",
                _usd(c.rent_usd_per_month, 0),
                _usd(c.own_usd_per_month, 0),
                c.cheaper,
                hours,
            ]
        )
    od = t.option("on_demand")
    for r in t.resale_sensitivity:
        rows.append(
            [
                f"resale at {r.resale_share:.0%} of the price",
                _usd(od.monthly_usd, 0) if od and od.monthly_usd is not None else "—",
                _usd(r.own_usd_per_month, 0),
                "own" if r.cheaper_than_rent else "rent",
                "",
            ]
        )
    return Table(
        ["Case", "Rent $/month", "Own $/month", "Cheaper", "Owning wins above"],
        rows,
        caption="Sensitivity: rental price ±30 % and resale value (computed from the inputs below)",
        align="lrrll",
    )


def blocks(t: Tco, heading_level: int = 2) -> list[Block]:
    """The TCO section: for `gpuwise cost` and the plan's scaling section."""
    out: list[Block] = [
        Heading("Buy vs rent vs API", heading_level),
        Paragraph(t.verdict, "strong"),
        option_table(t),
    ]
    if t.break_even_utilization_pct is not None or t.break_even_months is not None:
        be = []
        if t.break_even_held_hours_per_month is not None and t.break_even_utilization_pct is not None:
            be.append(
                f"break-even at {t.break_even_held_hours_per_month:,.0f} held h/month "
                f"({t.break_even_utilization_pct:.0f} % of the month)"
            )
        if t.break_even_months is not None:
            be.append(f"break-even after {t.break_even_months:.1f} months")
        out.append(Paragraph("Buy vs on-demand: " + ", ".join(be) + ".", ""))
    if t.rent_sensitivity:
        out.append(sensitivity_table(t))
    out.append(Table(["Input", "Value", "Source"], input_rows(t), caption="Inputs", align="lrl"))
    out.append(Bullets(list(t.notes), "muted"))
    return out


def document(t: Tco) -> Document:
    """Buy vs rent vs API as its own document (`gpuwise cost` shows it after the cost)."""
    i = t.inputs
    title = (
        f"Buy vs rent vs API: {i.num_gpus}x {i.gpu}, held {i.held_hours_per_month:,.0f} h/month, "
        f"{i.utilization_pct:g} % busy"
    )
    return Document(title, blocks(t, heading_level=2)[1:])


def plan_blocks(t: Tco | None, note: str) -> list[Block]:
    """Buy vs rent vs API for the plan's scaling decision, as the planner computed it."""
    if t is None:  # e.g. a user GPU without prices: the plan still renders
        return [Heading("Buy vs rent vs API", 3), Paragraph(note, "muted")] if note else []
    return blocks(t, heading_level=3)
