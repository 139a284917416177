"""Serving economics, in one place: demand → replicas → $/month → $ per 1M input, output and blended tokens.

`cost`, `plan`, `memory` and the buy-vs-rent-vs-API table all read serving money from here, so one
workload gets one answer:

- with a demand (``serving.rate`` or ``serving.tokens_per_day``) the deployment is the one ``plan``
  sizes on the workload's GPU, count and tp (``deployment_at_demand``: replicas from the simulated SLO
  goodput), its bill is its GPUs × $/GPU-hour × the held hours, and its tokens are the demand's;
- without one, the workload's GPUs serve at its concurrency flat out for the busy share
  (``utilization_pct``) of the held hours (``basis`` ``concurrency``, or ``batch-1`` when the
  concurrency is 1, labelled so).

The hosted-API option is priced for the same tokens a month (``serving_tco``); own and rent price the
same GPUs. The $/GPU-hour lookup (``usd_per_gpu_hour``) and the token arithmetic (``token_prices``)
live here too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from gpuwise.catalog import GPU, get_gpu, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.perf.cost import (
    HeldHours,
    Price,
    ServingBasis,
    ServingCost,
    gpu_price,
    held_hours,
    hours_per_month,
)
from gpuwise.perf.predict import predict
from gpuwise.perf.prediction import PerfPrediction
from gpuwise.perf.tco import Tco, tco_for
from gpuwise.workload import Workload

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.serving.evaluate import Deployment, ReplicaSearch

__all__ = [
    "MILLION",
    "SECONDS_PER_HOUR",
    "ServingEconomics",
    "TokenPrices",
    "deployment_at_demand",
    "is_llm_serving",
    "serving_cost",
    "serving_economics",
    "serving_tco",
    "token_prices",
    "usd_per_gpu_hour",
]


MILLION = 1_000_000
SECONDS_PER_HOUR = 3600.0


def usd_per_gpu_hour(gpu: GPU, workload: Workload | None = None) -> Price:
    """The price of one GPU-hour: the workload's override, else the catalog's verified price."""
    return gpu_price(gpu, workload)


@dataclass(frozen=True)
class TokenPrices:
    """What a deployment costs a month and per token over the hours it is held.

    Input and output tokens are priced apart, as APIs do: the monthly bill is split by the GPU
    time each side takes (``input_share`` = prefill seconds / (prefill + decode seconds) per
    request), then divided by the tokens of that side. ``blended`` divides the whole bill by all
    tokens and is what a single "$ per 1M tokens" compares against.
    """

    monthly_usd: float
    gpu_hours_per_month: float  # GPUs × held hours
    input_tokens_per_month: float
    output_tokens_per_month: float
    input_share: float
    usd_per_million_input: float
    usd_per_million_output: float
    usd_per_million_blended: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the token prices."""
        return asdict(self)


def _per_million(usd: float, tokens: float) -> float:
    return usd / tokens * MILLION if tokens else float("inf")


def _split(
    monthly: float, gpu_hours: float, tokens_in: float, tokens_out: float, share: float
) -> TokenPrices:
    share = min(max(share, 0.0), 1.0)
    return TokenPrices(
        monthly_usd=monthly,
        gpu_hours_per_month=gpu_hours,
        input_tokens_per_month=tokens_in,
        output_tokens_per_month=tokens_out,
        input_share=share,
        usd_per_million_input=_per_million(monthly * share, tokens_in),
        usd_per_million_output=_per_million(monthly * (1 - share), tokens_out),
        usd_per_million_blended=_per_million(monthly, tokens_in + tokens_out),
    )


def token_prices(
    usd_per_hour: float,
    gpus: int,
    rate_rps: float,
    prompt_tokens: float,
    output_tokens: float,
    input_share: float,
    held_hours_per_month: float | None = None,
) -> TokenPrices:
    """Prices for ``gpus`` GPUs at ``usd_per_hour`` each serving ``rate_rps`` requests/s over the held
    hours (default: every hour of the month)."""
    hours = hours_per_month() if held_hours_per_month is None else held_hours_per_month
    seconds = hours * SECONDS_PER_HOUR
    tokens_in = rate_rps * prompt_tokens * seconds
    tokens_out = rate_rps * output_tokens * seconds
    return _split(usd_per_hour * gpus * hours, gpus * hours, tokens_in, tokens_out, input_share)


def is_llm_serving(w: Workload) -> bool:
    """LLM inference on a catalog decoder: the workloads this module prices."""
    if not w.is_inference or w.is_cv or not w.model:
        return False
    try:
        arch = get_model(w.model)
    except GpuwiseError:
        return False
    return arch.is_transformer and arch.is_decoder


def deployment_at_demand(w: Workload, search: ReplicaSearch | None = None) -> Deployment | None:
    """The workload's own GPU, count and tp at its demand: replicas from the simulated SLO goodput,
    priced by ``token_prices`` (None without a demand). ``plan`` passes its shared ``search``."""
    from gpuwise.serving.demand import request_rate  # the sizing modules price through this one
    from gpuwise.serving.evaluate import ReplicaSearch, evaluate_deployment

    if request_rate(w) is None:
        return None
    return evaluate_deployment(search or ReplicaSearch(w), get_gpu(w.gpu), w.num_gpus, w.tp, w.pp)


@dataclass(frozen=True)
class ServingEconomics:
    """One serving workload's money: what was priced (``basis``, ``label``), on how many GPUs, for how
    many held hours, and the bill and $ per 1M tokens (``prices``; None without a price or a fit)."""

    basis: ServingBasis
    label: str
    gpu: str
    replicas: int
    gpus_per_replica: int
    total_gpus: int
    rate_rps: float | None  # requests/s of the demand (None: no demand)
    held: HeldHours
    utilization_pct: float  # busy share; sets the tokens only without a demand
    price: Price
    prices: TokenPrices | None
    capacity_tokens_per_month: float | None  # the GPUs flat out (at demand: at the SLO goodput)
    deployment: Deployment | None = None
    note: str = ""

    @property
    def monthly_usd(self) -> float | None:
        """$ per month of the priced GPUs (None without a price)."""
        return self.prices.monthly_usd if self.prices else None

    @property
    def tokens_per_month(self) -> tuple[float, float] | None:
        """(prompt, output) tokens a month the deployment serves: what a hosted API is priced on."""
        return (
            (self.prices.input_tokens_per_month, self.prices.output_tokens_per_month) if self.prices else None
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the deployment itself is shown by ``serving.at_demand``)."""
        data = {k: v for k, v in asdict(self).items() if k != "deployment"}
        data["held"] = self.held.to_dict()
        data["price"] = self.price.to_dict()
        data["prices"] = self.prices.to_dict() if self.prices else None
        return data


def serving_economics(
    w: Workload, *, usd_per_gpu_hour: float | None = None, perf: PerfPrediction | None = None
) -> ServingEconomics | None:
    """The money of an LLM serving workload (None for other work): at its demand as ``plan`` sizes it,
    else its GPUs at its concurrency for the busy share of the held hours. ``usd_per_gpu_hour`` (the
    ``--usd-per-hour`` flag) prices every GPU-hour, exactly as ``usd_per_gpu_hour`` in the workload."""
    if not is_llm_serving(w):
        return None
    if usd_per_gpu_hour is not None:
        w = w.with_changes(usd_per_gpu_hour=usd_per_gpu_hour)
    held = held_hours(w)
    util = 100.0 if w.utilization_pct is None else w.utilization_pct
    price = usd_per_gpu_hour_for(w)
    deployment = deployment_at_demand(w)
    if deployment is not None:
        return _at_demand(w, deployment, held, util, price)
    return _at_capacity(w, perf or predict(w, get_gpu(w.gpu)), held, util, price)


def usd_per_gpu_hour_for(w: Workload) -> Price:
    """The $/GPU-hour of the workload's own GPU."""
    return usd_per_gpu_hour(get_gpu(w.gpu), w)


def _at_demand(w: Workload, d: Deployment, held: HeldHours, util: float, price: Price) -> ServingEconomics:
    per_replica = d.tp * d.pp
    capacity = None
    if d.replicas and d.goodput_rps_per_replica > 0:
        capacity = (
            d.goodput_rps_per_replica * d.replicas * (w.seq_len + w.output_len) * 3600 * held.hours_per_month
        )
    label = (
        f"at the demand: {d.rate_rps:,.2f} req/s on {d.where}, "
        f"{d.replicas} replica(s) of {per_replica} GPU(s), "
        f"{held.hours_per_month:,.0f} h/month held"
        if d.replicas
        else f"at the demand: {d.rate_rps:,.2f} req/s on {d.gpu}: {d.note}"
    )
    return ServingEconomics(
        basis="demand",
        label=label,
        gpu=d.gpu,
        replicas=d.replicas,
        gpus_per_replica=per_replica,
        total_gpus=d.total_gpus,
        rate_rps=d.rate_rps,
        held=held,
        utilization_pct=util,
        price=price,
        prices=d.prices,
        capacity_tokens_per_month=capacity,
        deployment=d,
        note=d.note,
    )


def _at_capacity(
    w: Workload, perf: PerfPrediction, held: HeldHours, util: float, price: Price
) -> ServingEconomics:
    inf = perf.inference
    if inf is None:
        raise GpuwiseError(f"{w.model}: no inference prediction to price")
    seconds = held.hours_per_month * SECONDS_PER_HOUR
    out_s = inf.output_tokens_per_s
    in_s = max(inf.total_tokens_per_s - out_s, 0.0)
    prefill_s = inf.prompt_tokens / inf.prefill_tokens_per_s if inf.prefill_tokens_per_s else 0.0
    decode_s = inf.output_tokens * inf.tpot_s / max(inf.batch, 1)
    share = prefill_s / (prefill_s + decode_s) if prefill_s + decode_s > 0 else 0.0
    prices = None
    if price.usd_per_gpu_hour is not None:
        gpu_hours = w.num_gpus * held.hours_per_month
        busy = seconds * util / 100
        prices = _split(price.usd_per_gpu_hour * gpu_hours, gpu_hours, in_s * busy, out_s * busy, share)
    basis: ServingBasis = "batch-1" if inf.batch <= 1 else "concurrency"
    at = "batch 1 (one request at a time)" if basis == "batch-1" else f"concurrency {inf.batch}"
    label = (
        f"no demand given: {w.num_gpus} × {w.gpu} at {at}, flat out {util:g} % of "
        f"{held.hours_per_month:,.0f} held h/month"
    )
    return ServingEconomics(
        basis=basis,
        label=label,
        gpu=w.gpu,
        replicas=inf.replicas,
        gpus_per_replica=inf.tp * inf.pp,
        total_gpus=w.num_gpus,
        rate_rps=None,
        held=held,
        utilization_pct=util,
        price=price,
        prices=prices,
        capacity_tokens_per_month=(in_s + out_s) * seconds,
    )


def serving_cost(econ: ServingEconomics) -> ServingCost | None:
    """The ``cost`` command's serving figures from the economics (None without a price); ``estimate_cost``
    fills in the energy of the same GPUs."""
    p = econ.prices
    if p is None:
        return None
    seconds = econ.held.hours_per_month * SECONDS_PER_HOUR
    tokens = p.input_tokens_per_month + p.output_tokens_per_month
    return ServingCost(
        output_tokens_per_s=p.output_tokens_per_month / seconds,
        total_tokens_per_s=tokens / seconds,
        utilization_pct=econ.utilization_pct,
        usd_per_million_output_tokens=_per_million(p.monthly_usd, p.output_tokens_per_month),
        usd_per_million_tokens=p.usd_per_million_blended,
        monthly_cost_usd=p.monthly_usd,
        monthly_token_capacity=tokens,
        energy_kwh_per_month=0.0,
        basis=econ.basis,
        basis_label=econ.label,
        replicas=econ.replicas,
        total_gpus=econ.total_gpus,
        rate_rps=econ.rate_rps,
        held_hours_per_month=econ.held.hours_per_month,
        input_tokens_per_month=p.input_tokens_per_month,
        output_tokens_per_month=p.output_tokens_per_month,
        token_prices=p.to_dict(),
        capacity_tokens_per_month=econ.capacity_tokens_per_month,
    )


def serving_tco(
    w: Workload,
    econ: ServingEconomics | None = None,
    *,
    num_gpus: int | None = None,
    usd_per_gpu_hour: float | None = None,
    perf: PerfPrediction | None = None,
) -> Tco:
    """Buy vs rent vs API for the workload: an LLM serving workload's own/rent rows price the
    deployment's GPUs and its API row the same tokens a month; other work as ``tco_for``."""
    if econ is None and is_llm_serving(w):
        econ = serving_economics(w, usd_per_gpu_hour=usd_per_gpu_hour, perf=perf)
    if econ is None or econ.prices is None or not econ.total_gpus:
        return tco_for(w, perf, num_gpus=num_gpus, usd_per_gpu_hour=usd_per_gpu_hour)
    tokens = econ.tokens_per_month
    if num_gpus is not None and econ.basis != "demand" and tokens is not None:
        scale = num_gpus / econ.total_gpus  # more GPUs of the same replicas serve proportionally more
        tokens = (tokens[0] * scale, tokens[1] * scale)
    gpus = econ.total_gpus if econ.basis == "demand" else (num_gpus or econ.total_gpus)
    basis = "the demand" if econ.basis == "demand" else f"this deployment at {econ.basis}"
    return tco_for(
        w,
        perf,
        num_gpus=gpus,
        usd_per_gpu_hour=usd_per_gpu_hour,
        api_tokens_per_month=tokens,
        api_basis=f"what {basis} serves a month",
    )
