"""Buy vs rent vs API: the monthly cost of the same work when owning the GPUs, renting them
(on-demand, spot, reserved) or calling a hosted model, with the break-even points.

Owning is mostly fixed: the purchase written off over the amortization period, colocation, and
the node's power over the hours it is held (``gpuwise.perf.cost.energy``: GPUs busy at TDP for the
busy share, idle draw otherwise, the host, one PUE). On-demand and spot rentals are paid for every
hour the GPUs are held, busy or not (``held_hours_per_month``, default the whole month); a
reservation is paid every hour of its term. Buying wins above a break-even number of held hours a
month, after a break-even number of months. An API is priced per token for the same tokens a month
the deployment serves (``gpuwise.serving.economics``), so it only applies to LLM serving work.
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Literal, cast

from gpuwise.catalog import GPU, get_gpu, get_model
from gpuwise.catalog.bundled import bundled_text
from gpuwise.catalog.prices import HOURLY_KINDS, GpuPrice, price
from gpuwise.errors import GpuwiseError
from gpuwise.perf.cost import (
    HeldHours,
    cost_constants,
    default_pue,
    energy,
    held_hours,
    hours_per_month,
    run_time_s,
)
from gpuwise.perf.predict import predict
from gpuwise.perf.prediction import PerfPrediction
from gpuwise.perf.tco_sensitivity import RentCase, ResaleCase, rent_cases, resale_cases
from gpuwise.workload import Workload

__all__ = [
    "MILLION",
    "ApiPrice",
    "OptionKind",
    "OwnCost",
    "Tco",
    "TcoInputs",
    "TcoOption",
    "break_even_held_hours",
    "break_even_months",
    "break_even_utilization",
    "comparable_api",
    "compute_tco",
    "node_kw",
    "own_cost",
    "tco_for",
    "tco_inputs",
]


OptionKind = Literal["own", "on_demand", "spot", "reserved_1y", "reserved_3y", "api"]
_COMMITTED = {"reserved_1y", "reserved_3y"}  # paid for every hour of the month
MILLION = 1_000_000


@dataclass(frozen=True)
class ApiPrice:
    """A hosted API's published $ per million input and output tokens for a model, with its source and
    date."""

    model: str
    provider: str
    usd_per_mtok_input: float
    usd_per_mtok_output: float
    source: str
    as_of: str


@lru_cache(maxsize=1)
def _api_table() -> tuple[tuple[float, ApiPrice], ...]:
    text = bundled_text("gpuwise.catalog", "data/api_prices.csv")
    rows = []
    for row in csv.DictReader(text.splitlines()):
        api = ApiPrice(
            row["model"],
            row["provider"],
            float(row["usd_per_mtok_input"]),
            float(row["usd_per_mtok_output"]),
            row["source"],
            row["as_of"],
        )
        rows.append((float(row["max_params_b"]), api))
    return tuple(sorted(rows, key=lambda r: r[0]))


def comparable_api(params_b: float) -> ApiPrice:
    """The hosted model of the smallest size class that holds a model of ``params_b`` billion."""
    table = _api_table()
    return next((api for limit, api in table if params_b <= limit), table[-1][1])


@dataclass(frozen=True)
class TcoInputs:
    """What the buy-vs-rent-vs-API comparison assumes: GPUs, utilization, purchase price and amortization,
    power and operations, each with its source."""

    gpu: str
    num_gpus: int
    utilization_pct: float  # busy share of the held hours: energy only, never the rent
    purchase_usd_per_gpu: float | None
    purchase_source: str
    amortization_months: float
    tdp_w: float | None
    pue: float
    usd_per_kwh: float
    ops_usd_per_month: float  # colocation / ops for all GPUs
    ops_source: str
    monthly_budget_usd: float | None
    hours_per_month: float
    held_hours_per_month: float = 730.0  # what rental and ownership are priced on
    held_detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the inputs."""
        return asdict(self)


@dataclass(frozen=True)
class OwnCost:
    """Owning the GPUs, per month in $: amortized purchase, power at the stated utilization, operations."""

    capex_usd: float
    amortization_usd: float  # per month
    power_usd: float  # per month: the node over the held hours at the busy share
    ops_usd: float  # per month

    @property
    def monthly_usd(self) -> float:
        """$ per month of owning: amortization + power + operations."""
        return self.amortization_usd + self.power_usd + self.ops_usd

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the monthly total."""
        return {**asdict(self), "monthly_usd": self.monthly_usd}


@dataclass(frozen=True)
class TcoOption:
    """One way to get the work done (own, rent on demand or reserved, an API): its $ per month, how it was
    made, and whether it meets the budget."""

    kind: OptionKind
    monthly_usd: float | None  # None: no price published (the detail says why)
    detail: str  # how the figure was made
    source: str
    within_budget: bool | None  # None: no budget given, or no figure

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the option."""
        return asdict(self)


@dataclass(frozen=True)
class Tco:
    """The buy-vs-rent-vs-API comparison: the options in order, where owning breaks even, and the verdict."""

    inputs: TcoInputs
    own: OwnCost | None
    options: tuple[TcoOption, ...]  # own first, then rentals, then the API
    break_even_utilization_pct: float | None  # share of the month held above which owning wins (None: never)
    break_even_months: float | None  # months for the purchase to pay back vs on-demand (None: never)
    verdict: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    break_even_held_hours_per_month: float | None = None  # the same break-even in held hours
    api_tokens_per_month: tuple[float, float] | None = None  # (prompt, output) the API row is priced on
    rent_sensitivity: tuple[RentCase, ...] = ()  # own vs rent at the on-demand price x 0.7 / 1 / 1.3
    resale_sensitivity: tuple[ResaleCase, ...] = ()  # owning at 0 / 20 / 40 % resale value

    def option(self, kind: OptionKind) -> TcoOption | None:
        """The option of ``kind``, if the comparison has one."""
        return next((o for o in self.options if o.kind == kind), None)

    @property
    def cheapest(self) -> TcoOption | None:
        """The option with the lowest published $ per month (None when none has a price)."""
        priced = [o for o in self.options if o.monthly_usd is not None]
        return min(priced, key=lambda o: o.monthly_usd or 0.0) if priced else None

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuwise tco --json`` document body."""
        api = self.api_tokens_per_month
        return {
            "inputs": self.inputs.to_dict(),
            "own": self.own.to_dict() if self.own else None,
            "options": [o.to_dict() for o in self.options],
            "cheapest": self.cheapest.kind if self.cheapest else None,
            "break_even_utilization_pct": self.break_even_utilization_pct,
            "break_even_held_hours_per_month": self.break_even_held_hours_per_month,
            "api_input_tokens_per_month": api[0] if api else None,
            "api_output_tokens_per_month": api[1] if api else None,
            "break_even_months": self.break_even_months,
            "verdict": self.verdict,
            "notes": list(self.notes),
            "rent_sensitivity": [c.to_dict() for c in self.rent_sensitivity],
            "resale_sensitivity": [c.to_dict() for c in self.resale_sensitivity],
        }


def _non_negative(name: str, value: float | None) -> None:
    if value is not None and value < 0:
        raise GpuwiseError(f"{name} must not be negative, got {value}")


def _purchase(gpu: GPU, w: Workload) -> tuple[float | None, str]:
    if w.purchase_usd_per_gpu is not None:
        return w.purchase_usd_per_gpu, "purchase_usd_per_gpu in the workload"
    server = price(gpu.id, "purchase_server")
    if server is not None:
        return server.usd_per_gpu, (
            f"{server.provider} ${server.usd:,.0f} per server of {server.gpus} GPUs ({server.source})"
        )
    card = price(gpu.id, "purchase_gpu")
    if card is not None:
        return card.usd, f"{card.provider} ${card.usd:,.0f} per GPU, GPU only: add the host ({card.source})"
    return None, "no purchase price in the catalog: set purchase_usd_per_gpu"


def node_kw(gpu: GPU, num_gpus: int) -> float:
    """kW a colocation contract provisions for ``num_gpus`` GPUs: their TDP plus the host's share (CPUs,
    memory, NICs, NVSwitches, fans; ``host_power_fraction_of_gpu_tdp`` in cost.toml, from the DGX H100
    datasheet's 10.2 kW for 5.6 kW of GPUs)."""
    host = float(cost_constants()["energy"]["host_power_fraction_of_gpu_tdp"])
    return num_gpus * (gpu.tdp_w or 0.0) * (1 + host) / 1000


def tco_inputs(
    gpu: GPU, w: Workload, num_gpus: int | None = None, held: HeldHours | None = None
) -> TcoInputs:
    """The inputs, each from the workload when given, else the catalog or cost.toml default."""
    for name in ("purchase_usd_per_gpu", "ops_usd_per_month", "usd_per_kwh", "monthly_budget_usd"):
        _non_negative(name, getattr(w, name))
    if w.amortization_months is not None and w.amortization_months <= 0:
        raise GpuwiseError(f"amortization_months must be positive, got {w.amortization_months}")
    if w.pue is not None and not 1.0 <= w.pue <= 3.0:
        raise GpuwiseError(f"pue must be between 1.0 and 3.0, got {w.pue}")
    defaults = cost_constants()["tco"]
    n = num_gpus or w.num_gpus
    util = 100.0 if w.utilization_pct is None else w.utilization_pct
    held = held or held_hours(w)
    purchase, purchase_source = _purchase(gpu, w)
    if w.ops_usd_per_month is not None:
        ops, ops_source = w.ops_usd_per_month, "ops_usd_per_month in the workload"
    else:
        kw = node_kw(gpu, n)
        ops = kw * float(defaults["colo_usd_per_kw_month"])
        ops_source = (
            f"colocation ${defaults['colo_usd_per_kw_month']:.0f}/kW/month x {kw:,.1f} kW of node power "
            "(GPUs + host, NICs and switches; CBRE H2 2024)"
        )
    return TcoInputs(
        gpu=gpu.id,
        num_gpus=n,
        utilization_pct=util,
        purchase_usd_per_gpu=purchase,
        purchase_source=purchase_source,
        amortization_months=w.amortization_months or float(defaults["amortization_months"]),
        tdp_w=gpu.tdp_w,
        pue=w.pue if w.pue is not None else default_pue(),
        usd_per_kwh=w.usd_per_kwh
        if w.usd_per_kwh is not None
        else float(cost_constants()["energy"]["usd_per_kwh"]),
        ops_usd_per_month=ops,
        ops_source=ops_source,
        monthly_budget_usd=w.monthly_budget_usd,
        hours_per_month=hours_per_month(),
        held_hours_per_month=held.hours_per_month,
        held_detail=held.detail,
    )


def _power_per_held_hour(gpu: GPU, i: TcoInputs) -> float:
    """$ per held hour of the node's facility power at the busy share (``gpuwise.perf.cost.energy``)."""
    return energy(gpu, i.num_gpus, i.utilization_pct, i.pue, i.usd_per_kwh).energy_usd_per_hour


def own_cost(i: TcoInputs, gpu: GPU | None = None) -> OwnCost | None:
    """$ per month of owning the GPUs (None when no purchase price is known)."""
    if i.purchase_usd_per_gpu is None:
        return None
    capex = i.purchase_usd_per_gpu * i.num_gpus
    power = _power_per_held_hour(gpu or get_gpu(i.gpu), i) * i.held_hours_per_month
    return OwnCost(capex, capex / i.amortization_months, power, i.ops_usd_per_month)


def _budget(i: TcoInputs, monthly: float | None) -> bool | None:
    if i.monthly_budget_usd is None or monthly is None:
        return None
    return monthly <= i.monthly_budget_usd


def _rental(i: TcoInputs, p: GpuPrice) -> TcoOption:
    if p.kind in _COMMITTED:
        monthly = p.usd * i.num_gpus * i.hours_per_month
        how = (
            f"${p.usd:.2f}/GPU-h x {i.num_gpus} GPUs x {i.hours_per_month:.0f} h "
            "(a reservation is paid every hour of its term, busy or idle)"
        )
    else:
        monthly = p.usd * i.num_gpus * i.held_hours_per_month
        how = (
            f"${p.usd:.2f}/GPU-h x {i.num_gpus} GPUs x {i.held_hours_per_month:,.0f} h held "
            "(paid busy or idle)"
        )
    kind = cast(OptionKind, p.kind)  # hourly price kinds are a subset of the option kinds
    return TcoOption(
        kind,
        monthly,
        f"{how}; {p.provider}",
        p.source if p.as_of == "given" else f"{p.source} (as of {p.as_of})",
        _budget(i, monthly),
    )


def _api(i: TcoInputs, api: ApiPrice, tokens: tuple[float, float], basis: str) -> TcoOption:
    tin, tout = tokens
    monthly = tin / MILLION * api.usd_per_mtok_input + tout / MILLION * api.usd_per_mtok_output
    how = (
        f"{tin / 1e9:,.1f} B prompt + {tout / 1e9:,.1f} B output tokens/month ({basis}) at "
        f"${api.usd_per_mtok_input:.2f} / ${api.usd_per_mtok_output:.2f} per 1M ({api.model}, {api.provider})"
    )
    return TcoOption("api", monthly, how, f"{api.source} (as of {api.as_of})", _budget(i, monthly))


def break_even_held_hours(
    i: TcoInputs, own: OwnCost, on_demand_usd: float, gpu: GPU | None = None
) -> float | None:
    """Held hours a month above which owning costs less than renting on demand for those hours."""
    margin = on_demand_usd * i.num_gpus - _power_per_held_hour(gpu or get_gpu(i.gpu), i)
    if margin <= 0:
        return None
    hours = (own.amortization_usd + own.ops_usd) / margin
    return hours if hours <= i.hours_per_month else None


def break_even_utilization(i: TcoInputs, own: OwnCost, on_demand_usd: float) -> float | None:
    """The break-even in held hours as a share of the month (%): owning wins when the GPUs are held
    (rented) more of the month than this. (Before held hours existed this was read as a busy share.)"""
    hours = break_even_held_hours(i, own, on_demand_usd)
    return None if hours is None else 100 * hours / i.hours_per_month


def break_even_months(own: OwnCost, rent_monthly: float) -> float | None:
    """Months of renting that cost as much as buying plus running the GPUs meanwhile."""
    saving = rent_monthly - own.power_usd - own.ops_usd
    return own.capex_usd / saving if saving > 0 else None


def compute_tco(
    gpu: GPU,
    w: Workload,
    *,
    num_gpus: int | None = None,
    api_tokens_per_month: tuple[float, float] | None = None,
    api_basis: str = "",
    params_b: float | None = None,
    usd_per_gpu_hour: float | None = None,
    held: HeldHours | None = None,
) -> Tco:
    """Own vs rent vs API for ``w`` on ``num_gpus`` of ``gpu``; your $/GPU-hour (flag, else the
    workload's, else a user GPU's) replaces the catalog's on-demand rate.

    ``api_tokens_per_month`` is (prompt, output) tokens a month the deployment serves
    (``gpuwise.serving.economics``, described by ``api_basis``); with it and ``params_b`` an LLM
    serving workload is priced on a hosted API of a comparable size for the same tokens. Without it
    the API line says why it does not apply.
    """
    i = tco_inputs(gpu, w, num_gpus, held)
    own = own_cost(i, gpu)
    options: list[TcoOption] = []
    if own is not None:
        detail = (
            f"${own.capex_usd:,.0f} up front / {i.amortization_months:g} months + power "
            f"${own.power_usd:,.0f} + colocation/ops ${own.ops_usd:,.0f}"
        )
        options.append(
            TcoOption("own", own.monthly_usd, detail, i.purchase_source, _budget(i, own.monthly_usd))
        )
    else:
        options.append(TcoOption("own", None, i.purchase_source, "", None))
    on_demand = _on_demand(gpu, w, usd_per_gpu_hour)
    for kind in HOURLY_KINDS:
        listed = on_demand if kind == "on_demand" else price(gpu.id, kind)
        if listed is not None:
            options.append(_rental(i, listed))
    if api_tokens_per_month is not None and params_b is not None:
        options.append(_api(i, comparable_api(params_b), api_tokens_per_month, api_basis))
    else:
        why = (
            "training work has no hosted-API equivalent"
            if w.is_training
            else "not LLM serving work, or no monthly volume to price"
        )
        options.append(TcoOption("api", None, f"n/a: {why}", "", None))
    be_hours = be_util = be_months = None
    if own is not None and on_demand is not None:
        be_hours = break_even_held_hours(i, own, on_demand.usd, gpu)
        be_util = None if be_hours is None else 100 * be_hours / i.hours_per_month
        od = next(o for o in options if o.kind == "on_demand")
        be_months = break_even_months(own, od.monthly_usd or 0.0)
    notes = _notes(gpu, i)
    api_tokens = api_tokens_per_month if params_b is not None else None
    tco = Tco(i, own, tuple(options), be_util, be_months, "", notes, be_hours, api_tokens)
    rent_s: tuple[RentCase, ...] = ()
    resale_s: tuple[ResaleCase, ...] = ()
    if own is not None and on_demand is not None:
        od_option = tco.option("on_demand")
        rent_s = rent_cases(i, own, on_demand.usd)
        resale_s = resale_cases(own, od_option.monthly_usd if od_option else None)
    return Tco(
        i,
        own,
        tuple(options),
        be_util,
        be_months,
        _verdict(tco),
        notes,
        be_hours,
        api_tokens,
        rent_s,
        resale_s,
    )


def _notes(gpu: GPU, i: TcoInputs) -> tuple[str, ...]:
    notes = [
        f"rent and ownership are priced on the hours the GPUs are held: {i.held_detail}; the busy share "
        f"({i.utilization_pct:g} %) changes the power drawn, not the rent",
        "owning counts the node's power (GPUs busy at TDP, idle draw, host with its NICs and switches) x one "
        "PUE, and colocation on the node's provisioned kW; a multi-node fabric and staff go in "
        "ops_usd_per_month",
    ]
    if i.tdp_w is None:
        notes.insert(0, f"{gpu.id} has no TDP in the catalog: power and colocation are not counted")
    return tuple(notes)


def _on_demand(gpu: GPU, w: Workload, usd_per_gpu_hour: float | None) -> GpuPrice | None:
    """The on-demand rate to compare with: the user's when given, else the catalog's default."""
    for usd, origin in (
        (usd_per_gpu_hour, "--usd-per-hour"),
        (w.usd_per_gpu_hour, "usd_per_gpu_hour in the workload"),
        (gpu.cloud_usd_per_hr if gpu.origin != "catalog" else None, f"cloud_usd_per_hr in {gpu.origin}"),
    ):
        if usd is not None:
            return GpuPrice(gpu.id, "on_demand", usd, "gpu_hour", 1, "your rate", origin, "given")
    return price(gpu.id, "on_demand")


def _verdict(t: Tco) -> str:
    i = t.inputs
    best = t.cheapest
    if best is None:
        return "no option is priced: give purchase_usd_per_gpu or --usd-per-hour"
    names = {
        "own": "buying",
        "on_demand": "renting on demand",
        "spot": "renting spot",
        "reserved_1y": "a 1-year reservation",
        "reserved_3y": "a 3-year reservation",
        "api": "a hosted API",
    }
    parts = [
        f"On {i.num_gpus}x {i.gpu} held {i.held_hours_per_month:,.0f} h/month "
        f"({i.utilization_pct:g} % busy), "
        f"{names[best.kind]} is cheapest: ${best.monthly_usd:,.0f}/month"
    ]
    if t.own is not None and best.kind != "own":
        parts.append(f"buying costs ${t.own.monthly_usd:,.0f}/month")
    elif t.own is not None:
        od = t.option("on_demand")
        if od is not None and od.monthly_usd is not None:
            parts.append(f"renting on demand costs ${od.monthly_usd:,.0f}/month")
    if t.break_even_held_hours_per_month is not None and t.break_even_utilization_pct is not None:
        parts.append(
            "buying beats on-demand when the GPUs are held more than "
            f"{t.break_even_held_hours_per_month:,.0f} h/month "
            f"({t.break_even_utilization_pct:.0f} % of the month)"
        )
    elif t.own is not None and t.option("on_demand") is not None:
        parts.append("on-demand stays cheaper than buying however many hours the GPUs are held")
    if t.break_even_months is not None:
        late = t.break_even_months > i.amortization_months
        parts.append(
            f"the purchase pays back after {t.break_even_months:.1f} months of renting these hours"
            + (f", later than its {i.amortization_months:g}-month life" if late else "")
        )
    if i.monthly_budget_usd is not None:
        fits = [names[o.kind] for o in t.options if o.within_budget]
        budget = f"${i.monthly_budget_usd:,.0f}/month budget"
        parts.append(f"within the {budget}: {', '.join(fits)}" if fits else f"nothing fits the {budget}")
        if t.own is not None and t.option("own") and t.own.capex_usd > i.monthly_budget_usd:
            parts.append(
                f"buying needs ${t.own.capex_usd:,.0f} up front "
                f"({t.own.capex_usd / i.monthly_budget_usd:.1f} months of budget) or financing"
            )
    return "; ".join(parts) + "."


def tco_for(
    w: Workload,
    perf: PerfPrediction | None = None,
    num_gpus: int | None = None,
    usd_per_gpu_hour: float | None = None,
    api_tokens_per_month: tuple[float, float] | None = None,
    api_basis: str = "",
) -> Tco:
    """Own vs rent vs API for a workload as given (``num_gpus`` overrides its GPU count).

    LLM serving callers pass the tokens a month their deployment serves (``gpuwise.serving.economics``
    owns that figure); held hours of ``run`` take the training run's predicted duration.
    """
    gpu = get_gpu(w.gpu)
    run_s = None
    if w.held_hours_per_month == "run":
        perf = perf or predict(w, gpu)
        util = 100.0 if w.utilization_pct is None else w.utilization_pct
        run_s = run_time_s(w, perf, util)
    params_b = None
    if api_tokens_per_month is not None and w.model:
        params_b = get_model(w.model).num_params / 1e9
    return compute_tco(
        gpu,
        w,
        num_gpus=num_gpus,
        api_tokens_per_month=api_tokens_per_month,
        api_basis=api_basis,
        params_b=params_b,
        usd_per_gpu_hour=usd_per_gpu_hour,
        held=held_hours(w, run_s),
    )
