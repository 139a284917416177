"""What a workload costs: $/GPU-hour, a training run, 1M tokens served, energy, and when
self-hosting beats an API.

Prices come from the catalog (dated snapshots with sources) unless the user gives one; a GPU
without a verified price is never given an invented one. A reserved GPU is paid for every
hour, busy or not, which is what the API break-even compares against.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from gpuwise.catalog import GPU, get_gpu, list_gpus
from gpuwise.catalog.bundled import bundled_text
from gpuwise.errors import GpuwiseError
from gpuwise.perf.predict import predict
from gpuwise.perf.prediction import Bound, PerfPrediction
from gpuwise.workload import Workload
from gpuwise.workload.ml_framework import runs_on

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "MILLION",
    "BreakEven",
    "CostEstimate",
    "Energy",
    "GpuCostRow",
    "HeldBasis",
    "HeldHours",
    "Price",
    "ServingCost",
    "TrainingCost",
    "break_even",
    "compare_gpus",
    "cost_constants",
    "default_cooling_overhead_pct",
    "default_pue",
    "energy",
    "estimate_cost",
    "gpu_price",
    "held_hours",
    "hours_per_month",
    "interruption_factor",
    "missing_price_error",
]


MILLION = 1_000_000


@lru_cache(maxsize=1)
def cost_constants() -> dict[str, Any]:
    """``perf/data/cost.toml``: energy prices, cooling overhead and hours per month, each with its source."""
    text = bundled_text("gpuwise.perf", "data/cost.toml")
    return tomllib.loads(text)


def default_pue() -> float:
    """Power usage effectiveness (facility power / IT power) every energy figure uses (cost.toml [energy])."""
    return float(cost_constants()["energy"]["pue"])


def default_cooling_overhead_pct() -> float:
    """The default facility overhead on IT power, in %: (PUE - 1) x 100 (cost.toml [energy] pue)."""
    return (default_pue() - 1.0) * 100.0


def hours_per_month() -> float:
    """Hours in a billing month (cost.toml [time]): converts $/hour to $/month."""
    return float(cost_constants()["time"]["hours_per_month"])


@dataclass(frozen=True)
class Price:
    """The $/GPU-hour a cost uses and where it came from (a flag, the workload, the catalog), or why there
    is none."""

    usd_per_gpu_hour: float | None
    origin: str  # flag | workload | catalog | none
    source: str  # where the catalog price comes from, or why there is none

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the price."""
        return asdict(self)


def gpu_price(gpu: GPU, workload: Workload | None = None, usd_per_gpu_hour: float | None = None) -> Price:
    """The $/GPU-hour to use: the flag, then the workload's, then the catalog's verified price."""
    if usd_per_gpu_hour is not None:
        return Price(usd_per_gpu_hour, "flag", "given with --usd-per-hour")
    if workload is not None and workload.usd_per_gpu_hour is not None:
        return Price(workload.usd_per_gpu_hour, "workload", "usd_per_gpu_hour in the workload")
    if gpu.cloud_usd_per_hr is not None:
        return Price(gpu.cloud_usd_per_hr, "catalog", gpu.price_source)
    return Price(None, "none", gpu.price_source or "no price in the catalog")


def missing_price_error(gpu: GPU) -> GpuwiseError:
    """The error for a GPU without a verified price: names the catalog's reason and the flag that supplies
    one."""
    why = f" ({gpu.price_source})" if gpu.price_source else ""
    return GpuwiseError(
        f"no verified $/GPU-hour for {gpu.id} in the catalog{why}: pass --usd-per-hour X "
        "(or set usd_per_gpu_hour in the workload)"
    )


HeldBasis = Literal["month", "given", "run"]


@dataclass(frozen=True)
class HeldHours:
    """Hours a month the GPUs are held (rented, reserved or powered): what rental, reservation and ownership
    are priced on, whatever share of those hours the GPUs are busy."""

    hours_per_month: float
    basis: HeldBasis  # month: every hour (default) | given: held_hours_per_month | run: the run's duration
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the held hours."""
        return asdict(self)


def held_hours(workload: Workload, run_time_s: float | None = None) -> HeldHours:
    """The workload's held hours a month: the whole month unless ``held_hours_per_month`` says otherwise
    (a number of hours, or ``run``: rented only while the run lasts, ``run_time_s``)."""
    month = hours_per_month()
    value = workload.held_hours_per_month
    if value is None:
        return HeldHours(month, "month", f"held every hour of the month ({month:g} h)")
    if value == "run":
        if run_time_s is None or run_time_s <= 0:
            raise GpuwiseError(
                "held_hours_per_month: run prices the GPUs for the run's duration, which needs train_tokens "
                "(training); otherwise give the hours: held_hours_per_month: 200"
            )
        run_h = run_time_s / 3600
        longer = " (longer than a month: every hour of it)" if run_h > month else ""
        return HeldHours(min(run_h, month), "run", f"rented only while the run lasts: {run_h:,.1f} h{longer}")
    return HeldHours(float(value), "given", f"held {float(value):g} h a month (held_hours_per_month)")


@dataclass(frozen=True)
class Energy:
    """Power of the node while it is held: the GPUs (busy at TDP for the busy share, idle draw otherwise)
    plus the host, times one PUE; per hour and per month of held hours."""

    tdp_w: float | None
    utilization_pct: float  # busy share of the held hours
    gpu_power_w: float  # all GPUs, averaged over the held hours
    host_power_w: float  # CPUs, memory, NICs, switches, fans: a fraction of GPU TDP (cost.toml)
    it_power_w: float  # GPUs + host
    pue: float
    cooling_overhead_pct: float  # (pue - 1) x 100
    facility_power_w: float  # it_power_w x pue
    kwh_per_hour: float
    usd_per_kwh: float
    energy_usd_per_hour: float  # informational for rented GPUs: cloud hourly prices already include power
    held_hours_per_month: float
    kwh_per_month: float
    energy_usd_per_month: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the energy figures."""
        return asdict(self)


def energy(
    gpu: GPU,
    num_gpus: int,
    utilization_pct: float,
    pue: float | None = None,
    usd_per_kwh: float | None = None,
    held_hours_per_month: float | None = None,
) -> Energy:
    """Power and energy of a node of ``num_gpus`` GPUs held ``held_hours_per_month`` (default: the month),
    busy ``utilization_pct`` of them: busy GPUs at TDP, idle ones at the idle fraction, the host at its
    fraction of GPU TDP, all x PUE (cost.toml [energy], each with its source)."""
    pue = default_pue() if pue is None else pue
    if not 1.0 <= pue <= 3.0:
        raise GpuwiseError(f"PUE must be between 1.0 and 3.0 (cooling overhead 0-200 %), got {pue:g}")
    const = cost_constants()["energy"]
    price = float(const["usd_per_kwh"]) if usd_per_kwh is None else usd_per_kwh
    hours = hours_per_month() if held_hours_per_month is None else held_hours_per_month
    tdp = gpu.tdp_w or 0.0
    busy = utilization_pct / 100
    idle_fraction = float(const["gpu_idle_power_fraction_of_tdp"])
    gpu_w = tdp * num_gpus * (busy + (1 - busy) * idle_fraction)
    host_w = tdp * num_gpus * float(const["host_power_fraction_of_gpu_tdp"])
    facility_w = (gpu_w + host_w) * pue
    kwh_h = facility_w / 1000
    return Energy(
        gpu.tdp_w,
        utilization_pct,
        gpu_w,
        host_w,
        gpu_w + host_w,
        pue,
        (pue - 1) * 100,
        facility_w,
        kwh_h,
        price,
        kwh_h * price,
        hours,
        kwh_h * hours,
        kwh_h * hours * price,
    )


@dataclass(frozen=True)
class TrainingCost:
    """What a training run costs: tokens/s, run time and GPU-hours when the dataset size is known, $ per
    run and $ per billion tokens."""

    tokens_per_s: float
    train_tokens: float | None  # dataset tokens × epochs (None: not given, per-token figures only)
    epochs: float
    run_time_s: float | None
    gpu_hours: float | None
    run_cost_usd: float | None
    usd_per_billion_tokens: float
    energy_kwh: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the training cost."""
        return asdict(self)


ServingBasis = Literal["demand", "concurrency", "batch-1"]


@dataclass(frozen=True)
class ServingCost:
    """What serving costs a month and per token. ``basis`` says what was priced: ``demand`` (the
    deployment ``plan`` sizes for ``serving.rate``: its replicas, GPUs and tokens), ``concurrency`` (one
    deployment of the workload's GPUs at its concurrency, flat out for the busy share of the held hours)
    or ``batch-1`` (the same at one request at a time)."""

    output_tokens_per_s: float  # of the priced deployment (at demand: the demand's)
    total_tokens_per_s: float  # prompt + output
    utilization_pct: float  # busy share of the held hours (not used at demand: the demand sets the work)
    usd_per_million_output_tokens: float  # the whole bill / output tokens
    usd_per_million_tokens: float  # the whole bill / (prompt + output) tokens: blended, as plan shows it
    monthly_cost_usd: float  # the deployment's GPUs x $/GPU-hour x held hours
    monthly_token_capacity: float  # prompt + output tokens served a month (at demand: the demand's)
    energy_kwh_per_month: float
    basis: ServingBasis = "concurrency"
    basis_label: str = ""
    replicas: int = 1
    total_gpus: int = 1
    rate_rps: float | None = None  # the demand (None without one)
    held_hours_per_month: float = 730.0
    input_tokens_per_month: float = 0.0
    output_tokens_per_month: float = 0.0
    token_prices: dict[str, Any] | None = None  # serving.economics.TokenPrices: $/1M input, output, blended
    capacity_tokens_per_month: float | None = None  # the priced GPUs flat out (at demand: SLO goodput)

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the serving cost."""
        return asdict(self)


@dataclass(frozen=True)
class BreakEven:
    """API price vs a reserved self-hosted deployment of this workload."""

    api_usd_per_million_tokens: float
    self_hosted_usd_per_month: float
    break_even_tokens_per_month: float  # volume above which self-hosting is cheaper
    capacity_tokens_per_month: float  # what this deployment can serve flat out
    self_hosted_usd_per_million_at_capacity: float
    self_hosting_can_win: bool  # break-even volume fits within the capacity
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the break-even figures."""
        return asdict(self)


def break_even(monthly_usd: float, capacity_tokens_per_month: float, api_usd_per_mtok: float) -> BreakEven:
    """Monthly token volume at which the reserved deployment costs what the API would.

    Self-hosted cost is flat (paid whether used or not); API cost grows with volume. Adding
    replicas repeats the same cost per token, so if one deployment at full load is dearer per
    token than the API, no volume breaks even.
    """
    if api_usd_per_mtok <= 0:
        raise GpuwiseError(f"the API price must be positive, got {api_usd_per_mtok}")
    volume = monthly_usd / api_usd_per_mtok * MILLION
    at_capacity = (
        monthly_usd / capacity_tokens_per_month * MILLION if capacity_tokens_per_month else float("inf")
    )
    can_win = volume <= capacity_tokens_per_month
    if can_win:
        verdict = (
            f"self-hosting is cheaper above {volume / 1e6:,.0f} M tokens/month "
            f"({100 * volume / capacity_tokens_per_month:.0f} % of this deployment's capacity)"
        )
    else:
        verdict = (
            f"the API is cheaper at any volume: this deployment costs ${at_capacity:,.3f} per 1M tokens "
            f"even flat out, vs ${api_usd_per_mtok:,.3f} from the API"
        )
    return BreakEven(
        api_usd_per_mtok, monthly_usd, volume, capacity_tokens_per_month, at_capacity, can_win, verdict
    )


@dataclass(frozen=True)
class CostEstimate:
    """The ``gpuwise cost`` result: price, energy and the performance prediction behind it, with the
    training or serving cost."""

    gpu: str
    gpu_name: str
    num_gpus: int
    price: Price
    usd_per_hour: float  # all GPUs of the job
    energy: Energy
    perf: PerfPrediction
    training: TrainingCost | None = None
    serving: ServingCost | None = None
    break_even: BreakEven | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuwise cost --json`` document body."""
        return {
            "gpu": self.gpu,
            "gpu_name": self.gpu_name,
            "num_gpus": self.num_gpus,
            "price": self.price.to_dict(),
            "usd_per_hour": self.usd_per_hour,
            "energy": self.energy.to_dict(),
            "training": self.training.to_dict() if self.training else None,
            "serving": self.serving.to_dict() if self.serving else None,
            "break_even": self.break_even.to_dict() if self.break_even else None,
            "notes": list(self.notes),
            "perf": self.perf.to_dict(),
        }


def _pue(workload: Workload, cooling_overhead_pct: float | None) -> float:
    """The one PUE: ``--cooling-overhead`` (= (PUE - 1) x 100), else the workload's ``pue``, else
    cost.toml's."""
    if cooling_overhead_pct is not None:
        if not 0 <= cooling_overhead_pct <= 200:
            raise GpuwiseError(f"cooling overhead must be between 0 and 200 %, got {cooling_overhead_pct}")
        return 1 + cooling_overhead_pct / 100
    return workload.pue if workload.pue is not None else default_pue()


def interruption_factor(num_gpus: int) -> float:
    """Wall time / clean time of a training run on ``num_gpus`` GPUs: failures and restarts.

    Interruptions arrive at a rate per GPU-hour and each costs a restart plus the work since the last
    checkpoint (cost.toml [reliability], from the Llama 3 paper's 16k-GPU run): the lost share grows
    with the GPU count, not with the run's length. 1.0004 at 64 GPUs, 1.11 at 16,384.
    """
    r = cost_constants()["reliability"]
    lost = min(
        float(r["interruptions_per_gpu_hour"]) * num_gpus * float(r["hours_lost_per_interruption"]),
        float(r["max_lost_share"]),
    )
    return 1.0 / (1.0 - lost)


def run_time_s(workload: Workload, perf: PerfPrediction, utilization_pct: float) -> float | None:
    """Wall time of a training run (train_tokens x epochs at the predicted speed x busy share, plus the
    time failures and restarts take: :func:`interruption_factor`), or None."""
    if not workload.is_training or workload.train_tokens is None or perf.tokens_per_s <= 0:
        return None
    clean = workload.train_tokens * workload.epochs / (perf.tokens_per_s * utilization_pct / 100)
    return clean * interruption_factor(workload.num_gpus)


def estimate_cost(
    workload: Workload,
    gpu: GPU | None = None,
    *,
    usd_per_gpu_hour: float | None = None,
    api_usd_per_mtok: float | None = None,
    cooling_overhead_pct: float | None = None,
    utilization_pct: float | None = None,
    usd_per_kwh: float | None = None,
    perf: PerfPrediction | None = None,
    serving: ServingCost | None = None,
) -> CostEstimate:
    """Cost of ``workload`` on ``gpu`` (default: the workload's). Raises if no price is known.

    ``utilization_pct`` (default: the workload's, else 100) is the busy share of the held hours: it
    stretches a training run and sets the tokens a serving deployment without a demand produces, and the
    energy; it never scales what a held GPU is paid. ``serving`` is the LLM serving cost from
    ``gpuwise.serving.economics`` (the deployment at the demand, as ``plan`` prices it).
    """
    gpu = gpu or get_gpu(workload.gpu)
    price = gpu_price(gpu, workload, usd_per_gpu_hour)
    if price.usd_per_gpu_hour is None:
        raise missing_price_error(gpu)
    if price.usd_per_gpu_hour < 0:
        raise GpuwiseError(f"$/GPU-hour must not be negative, got {price.usd_per_gpu_hour}")
    util = utilization_pct if utilization_pct is not None else workload.utilization_pct
    util = 100.0 if util is None else util
    if not 0 < util <= 100:
        raise GpuwiseError(f"utilization must be above 0 and at most 100 %, got {util}")
    perf = perf or predict(workload, gpu)
    held = held_hours(workload, run_time_s(workload, perf, util))
    n = serving.total_gpus if serving is not None else workload.num_gpus
    hourly = price.usd_per_gpu_hour * n
    power = energy(gpu, n, util, _pue(workload, cooling_overhead_pct), usd_per_kwh, held.hours_per_month)
    notes: list[str] = [f"GPUs {held.detail}"]
    if gpu.tdp_w is None:
        notes.append(f"{gpu.id} has no TDP in the catalog: energy is not estimated")
    if price.origin == "catalog":
        notes.append(f"price: ${price.usd_per_gpu_hour:.2f}/GPU-hour, {price.source}")
    training = be = None
    if workload.is_training:
        training = _training_cost(workload, perf, hourly, power, util)
        extra = interruption_factor(workload.num_gpus) - 1.0
        if training.run_time_s is not None and extra >= 0.001:
            notes.append(
                f"run time includes {100 * extra:.1f} % for failures and restarts on "
                f"{workload.num_gpus:,} GPUs (interruption rate and lost work per interruption from the "
                "Llama 3 paper, perf/data/cost.toml)"
            )
        if api_usd_per_mtok is not None:
            notes.append("the API break-even applies to serving workloads; ignored for training")
    else:
        if serving is not None:
            serving = replace(serving, energy_kwh_per_month=power.kwh_per_month)
        else:
            serving = _serving_cost(perf, hourly, power, util)
        if api_usd_per_mtok is not None:
            be = break_even(serving.monthly_cost_usd, _capacity_tokens(serving, perf), api_usd_per_mtok)
    if not perf.fits:
        notes.append("the workload does not fit this GPU as configured: figures assume it did")
    return CostEstimate(gpu.id, gpu.name, n, price, hourly, power, perf, training, serving, be, notes)


def _capacity_tokens(serving: ServingCost, perf: PerfPrediction) -> float:
    """Tokens a month the priced GPUs could serve flat out, for the API break-even."""
    if serving.capacity_tokens_per_month is not None:
        return serving.capacity_tokens_per_month
    per_replica_s = perf.inference.total_tokens_per_s if perf.inference else perf.tokens_per_s
    return per_replica_s * serving.replicas * 3600 * serving.held_hours_per_month


def _training_cost(
    workload: Workload, perf: PerfPrediction, hourly: float, power: Energy, util: float
) -> TrainingCost:
    # Utilization below 100 % means the job also waits (input, restarts): time stretches.
    tokens_s = perf.tokens_per_s * util / 100
    per_billion = hourly / (tokens_s * 3600) * 1e9
    if workload.train_tokens is None:
        return TrainingCost(tokens_s, None, workload.epochs, None, None, None, per_billion, None)
    total = workload.train_tokens * workload.epochs
    seconds = total / tokens_s * interruption_factor(workload.num_gpus)  # failures and restarts included
    hours = seconds / 3600
    return TrainingCost(
        tokens_s,
        total,
        workload.epochs,
        seconds,
        hours * workload.num_gpus,
        hours * hourly,
        per_billion,
        hours * power.kwh_per_hour,
    )


def _serving_cost(perf: PerfPrediction, hourly: float, power: Energy, util: float) -> ServingCost:
    """Serving cost from the prediction alone (non-LLM inference: images; LLM serving is priced by
    ``gpuwise.serving.economics``)."""
    inf = perf.inference
    output_s = perf.tokens_per_s
    total_s = inf.total_tokens_per_s if inf else perf.tokens_per_s
    served_hour_out = output_s * 3600 * util / 100
    served_hour_total = total_s * 3600 * util / 100
    held = power.held_hours_per_month
    return ServingCost(
        output_tokens_per_s=output_s,
        total_tokens_per_s=total_s,
        utilization_pct=util,
        usd_per_million_output_tokens=hourly / served_hour_out * MILLION,
        usd_per_million_tokens=hourly / served_hour_total * MILLION,
        monthly_cost_usd=hourly * held,
        monthly_token_capacity=served_hour_total * held,
        energy_kwh_per_month=power.kwh_per_month,
        basis="concurrency" if inf is None or inf.batch > 1 else "batch-1",
        held_hours_per_month=held,
    )


@dataclass(frozen=True)
class GpuCostRow:
    """One catalog GPU in a cost comparison."""

    gpu: str
    gpu_name: str
    fits: bool | None  # None: fit not checked (training without a memory estimate)
    fit_note: str
    usd_per_gpu_hour: float | None
    tokens_per_s: float | None
    step_time_s: float | None
    bound: Bound | None
    run_cost_usd: float | None  # training with train_tokens
    usd_per_billion_tokens: float | None  # training
    usd_per_million_tokens: float | None  # serving (prompt + output)
    ttft_s: float | None
    tpot_s: float | None
    batch: int | None = None  # serving: decode batch per replica (capped by KV-cache memory)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form of one GPU's row of the cost comparison."""
        return asdict(self)


def compare_gpus(
    workload: Workload,
    *,
    usd_per_gpu_hour: float | None = None,
    cooling_overhead_pct: float | None = None,
    utilization_pct: float | None = None,
    gpus: list[GPU] | None = None,
) -> list[GpuCostRow]:
    """Speed and cost of the same workload (same GPU count and parallelism) on every catalog GPU.

    GPUs without a verified price still get a speed; their cost stays empty unless a price is
    given. Sorted: fitting GPUs with a cost first (cheapest first), then the rest.
    """
    rows = []
    for gpu in gpus or list_gpus():
        if not runs_on(workload.framework, gpu):
            continue  # a TPU for a PyTorch workload, a Gaudi for JAX (workload/ml_framework.py)
        rows.append(_compare_one(workload, gpu, usd_per_gpu_hour, cooling_overhead_pct, utilization_pct))

    def key(r: GpuCostRow) -> tuple:
        cost = (
            r.run_cost_usd
            if r.run_cost_usd is not None
            else (r.usd_per_billion_tokens or r.usd_per_million_tokens)
        )
        return (r.fits is False, cost is None, cost if cost is not None else 0.0, -(r.tokens_per_s or 0.0))

    return sorted(rows, key=key)


def _compare_one(
    workload: Workload, gpu: GPU, usd: float | None, cooling: float | None, util: float | None
) -> GpuCostRow:
    try:
        perf = predict(workload, gpu)
    except GpuwiseError as err:
        return GpuCostRow(
            gpu.id, gpu.name, False, str(err), None, None, None, None, None, None, None, None, None
        )
    fits, fit_note = _fits(workload, gpu, perf)
    inf = perf.inference
    price = gpu_price(gpu, workload, usd)
    row = GpuCostRow(
        gpu=gpu.id,
        gpu_name=gpu.name,
        fits=fits,
        fit_note=fit_note,
        usd_per_gpu_hour=price.usd_per_gpu_hour,
        tokens_per_s=perf.tokens_per_s,
        step_time_s=perf.step_time_s,
        bound=perf.bound,
        ttft_s=inf.ttft_s if inf else None,
        tpot_s=inf.tpot_s if inf else None,
        batch=inf.batch if inf else None,
        run_cost_usd=None,
        usd_per_billion_tokens=None,
        usd_per_million_tokens=None,
    )
    if price.usd_per_gpu_hour is None:
        return replace(row, note="no verified price")
    est = estimate_cost(
        workload, gpu, usd_per_gpu_hour=usd, cooling_overhead_pct=cooling, utilization_pct=util, perf=perf
    )
    if est.training:
        row = replace(
            row,
            run_cost_usd=est.training.run_cost_usd,
            usd_per_billion_tokens=est.training.usd_per_billion_tokens,
        )
    if est.serving:
        row = replace(row, usd_per_million_tokens=est.serving.usd_per_million_tokens)
    return row


def _fits(workload: Workload, gpu: GPU, perf: PerfPrediction) -> tuple[bool | None, str]:
    """Does the workload fit in this GPU's memory? Serving: at least one sequence's KV cache
    fits next to the weights; training: gpuwise.memory's estimate (both decided in predict)."""
    if perf.inference is not None:
        cap = perf.inference.max_concurrency
        return cap >= 1, (
            f"KV cache for {cap:,} sequence(s)" if cap >= 1 else "weights leave no room for the KV cache"
        )
    if perf.training is not None:
        return perf.fits, next((n for n in perf.notes if n.startswith("does not fit")), "fits")
    return None, "memory not checked"
