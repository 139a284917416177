"""One serving deployment at the demand: goodput, replicas, latency at the rate, money, diagnosis.

``evaluate_deployment(workload, gpu, gpus_per_node, tp)`` is what every serving number in
``cost`` and ``plan`` comes from; ``ReplicaSearch`` caches the per-replica work (KV capacity,
goodput search) so a sweep over GPU counts reuses it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from gpuwise.catalog import GPU
from gpuwise.diagnose import thresholds as th
from gpuwise.errors import GpuwiseError
from gpuwise.perf.cost import held_hours
from gpuwise.perf.kv_capacity import KvCapacity
from gpuwise.serving.demand import RequestDraws, draw_requests, request_rate
from gpuwise.serving.economics import TokenPrices, token_prices, usd_per_gpu_hour
from gpuwise.serving.goodput import Goodput, effective_slo, meets, search_goodput
from gpuwise.serving.mig import catalog_id
from gpuwise.serving.simulator import Replica, SimResult, simulate
from gpuwise.workload import Workload

__all__ = [
    "EXTRA_NODES_TRIED",
    "PERCENTILES",
    "REQUESTS_SIMULATED",
    "Bottleneck",
    "Deployment",
    "Latency",
    "ReplicaSearch",
    "diagnose",
    "evaluate_deployment",
    "input_time_share",
    "prefill_seconds",
]


Bottleneck = Literal[
    "prefill-bound", "decode-bandwidth-bound", "decode-compute-bound", "kv-capacity-bound", "queueing"
]
REQUESTS_SIMULATED = 300  # requests per simulated run (the cap; p99 is then the 3rd-worst request)
EXTRA_NODES_TRIED = 2  # nodes added when the rate split over ⌈rate / goodput⌉ nodes misses the SLO
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Latency:
    """Percentiles (seconds) of time to first token, time per output token and end-to-end latency."""

    ttft_s: dict[int, float]
    tpot_s: dict[int, float]
    e2e_s: dict[int, float]

    @classmethod
    def of(cls, run: SimResult) -> Latency:
        """The p50/p90/p99 of TTFT, TPOT and end-to-end latency (s) of a simulation run."""
        return cls(*({p: run.percentile(m, p) for p in PERCENTILES} for m in ("ttft", "tpot", "e2e")))

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``ttft_p50``… keys, seconds."""
        return {
            f"{m}_p{p}": v[p]
            for m, v in (("ttft", self.ttft_s), ("tpot", self.tpot_s), ("e2e", self.e2e_s))
            for p in v
        }


@dataclass(frozen=True)
class Deployment:
    """``gpus_per_node`` GPUs of one type running replicas of tp × pp GPUs, enough nodes for the rate."""

    gpu: str
    gpu_name: str
    gpus_per_node: int
    tp: int
    pp: int
    fits: bool
    note: str
    kv: KvCapacity | None = None
    goodput_rps_per_replica: float = 0.0
    goodput_rps_per_node: float = 0.0
    saturation_rps_per_replica: float = 0.0
    binding_slo: str = ""
    rate_rps: float = 0.0
    nodes: int = 0
    replicas: int = 0
    total_gpus: int = 0
    latency: Latency | None = None  # at the requested rate, spread over the replicas
    meets_slo: bool = False
    mean_decode_batch: float = 0.0
    preemptions: int = 0
    diagnosis: tuple[Bottleneck, ...] = ()
    usd_per_gpu_hour: float | None = None
    price_source: str = ""
    prices: TokenPrices | None = None
    simulations: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        """``3 × h100-sxm (tp 1)`` or ``2 node(s) of 4 × h100-sxm (tp 4)``: one wording everywhere."""
        split = f"tp {self.tp}" + (f", pp {self.pp}" if self.pp > 1 else "")
        if self.gpus_per_node == 1:
            return f"{self.nodes} × {self.gpu} ({split})"
        return f"{self.nodes} node(s) of {self.gpus_per_node} × {self.gpu} ({split})"

    @property
    def monthly_usd(self) -> float | None:
        """$ per month of the deployment's GPUs (None without a price)."""
        return self.prices.monthly_usd if self.prices else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the deployment: replicas, KV capacity, latency, prices, diagnosis and notes."""
        data = asdict(self)
        data["kv"] = self.kv.to_dict() if self.kv else None
        data["latency"] = self.latency.to_dict() if self.latency else None
        data["prices"] = self.prices.to_dict() if self.prices else None
        data["diagnosis"] = list(self.diagnosis)
        data["notes"] = list(self.notes)
        return data


class ReplicaSearch:
    """Per-(GPU, tp, pp) work shared by every node size: the replica model and its goodput."""

    def __init__(self, workload: Workload, draws: RequestDraws | None = None) -> None:
        self.workload = workload
        self.rate = request_rate(workload)
        if self.rate is None:
            raise GpuwiseError(
                "a serving plan needs a demand: serving.rate (requests/s) or serving.tokens_per_day"
            )
        self.draws = draws or draw_requests(workload, REQUESTS_SIMULATED)
        self.slo = effective_slo(workload.serving.slo if workload.serving else ())
        self._goodput: dict[tuple[str, int, int], tuple[Replica | None, Goodput | None, str]] = {}
        self._runs: dict[tuple[str, int, int, float], SimResult] = {}

    def replica(self, gpu: GPU, tp: int, pp: int) -> tuple[Replica | None, Goodput | None, str]:
        """The replica of ``gpu`` at ``tp``×``pp`` with its SLO goodput (searched once, then cached), or
        None and the reason it cannot serve."""
        key = (gpu.id, tp, pp)
        if key not in self._goodput:
            self._goodput[key] = self._search(gpu, tp, pp)
        return self._goodput[key]

    def _search(self, gpu: GPU, tp: int, pp: int) -> tuple[Replica | None, Goodput | None, str]:
        try:
            w = self.workload.with_changes(gpu=catalog_id(gpu.id), tp=tp, pp=pp, num_gpus=tp * pp)
            replica = Replica(w, gpu)
        except GpuwiseError as err:
            return None, None, str(err)
        cap = replica.capacity
        if cap.max_sequences < 1:
            return (
                replica,
                None,
                f"weights leave no room for one {cap.tokens_per_sequence:,}-token sequence's KV cache",
            )
        return replica, search_goodput(replica, self.draws, self.slo), ""

    def run(self, replica: Replica, rate: float) -> SimResult:
        """A simulation of ``replica`` at ``rate`` requests/s on the shared draws (cached per replica and
        rate)."""
        key = (replica.gpu.id, replica.workload.tp, replica.workload.pp, round(rate, 9))
        if key not in self._runs:
            self._runs[key] = simulate(replica, self.draws, rate)
        return self._runs[key]


def evaluate_deployment(
    search: ReplicaSearch, gpu: GPU, gpus_per_node: int, tp: int, pp: int = 1
) -> Deployment:
    """The deployment of ``gpus_per_node``-GPU nodes (replicas of tp × pp) that serves the rate."""
    per_replica = tp * pp
    base = Deployment(gpu.id, gpu.name, gpus_per_node, tp, pp, False, "")
    if gpus_per_node % per_replica:
        return replace(base, note=f"{gpus_per_node} GPUs do not hold replicas of tp × pp = {per_replica}")
    replica, good, why = search.replica(gpu, tp, pp)
    if replica is None or good is None:
        return replace(base, note=why, kv=replica.capacity if replica else None)
    rate = search.rate or 0.0
    price = usd_per_gpu_hour(gpu, search.workload)
    fitted = replace(
        base,
        fits=True,
        kv=replica.capacity,
        saturation_rps_per_replica=good.saturation_rps,
        binding_slo=good.binding,
        rate_rps=rate,
        usd_per_gpu_hour=price.usd_per_gpu_hour,
        price_source=price.source,
    )
    if good.rate_rps <= 0:
        return replace(
            fitted, note=f"misses the SLO even at low load ({good.binding})", simulations=good.simulations
        )
    per_node = gpus_per_node // per_replica
    nodes = max(1, math.ceil(rate / (good.rate_rps * per_node) - 1e-9))
    run = search.run(replica, rate / (nodes * per_node))
    for _ in range(EXTRA_NODES_TRIED):  # goodput is read to ~4 %: a rate just under it may still miss
        if meets(run, search.slo):
            break
        nodes += 1
        run = search.run(replica, rate / (nodes * per_node))
    replicas = nodes * per_node
    total = nodes * gpus_per_node
    prices = None
    if price.usd_per_gpu_hour is not None:
        share = input_time_share(replica, run)
        prices = token_prices(
            price.usd_per_gpu_hour,
            total,
            rate,
            search.draws.mean_prompt,
            search.draws.mean_output,
            share,
            held_hours(search.workload).hours_per_month,
        )
    return replace(
        fitted,
        goodput_rps_per_replica=good.rate_rps,
        goodput_rps_per_node=good.rate_rps * per_node,
        nodes=nodes,
        replicas=replicas,
        total_gpus=total,
        latency=Latency.of(run),
        meets_slo=meets(run, search.slo),
        mean_decode_batch=run.mean_decode_batch,
        preemptions=run.preemptions,
        diagnosis=diagnose(replica, run, good),
        prices=prices,
        simulations=good.simulations + 1,
    )


def prefill_seconds(replica: Replica) -> float:
    """One mean prompt (after prefix-cache hits) prefilled alone on an idle replica."""
    prompt = replica.workload.seq_len
    computed = max(1, math.ceil(prompt * (1 - replica.hit_rate)))
    return replica.iteration_s(0, 0.0, computed, float(prompt))


def input_time_share(replica: Replica, run: SimResult) -> float:
    """Prefill's share of the GPU time a request takes: prompt prefill vs its decode steps at the
    run's mean batch (each step's time shared by the batch)."""
    w = replica.workload
    batch = max(run.mean_decode_batch, 1.0)
    decode = (
        w.output_len
        / replica.tokens_per_step
        * replica.iteration_s(round(batch), w.seq_len + w.output_len / 2, 0, 0.0)
        / batch
    )
    pre = prefill_seconds(replica)
    return pre / (pre + decode)


def diagnose(replica: Replica, run: SimResult, good: Goodput) -> tuple[Bottleneck, ...]:
    """What limits this replica at the requested rate, most binding first."""
    found: list[Bottleneck] = []
    # Arrivals faster than the replica's saturation rate make the queue grow without bound, however
    # short the simulated window keeps it; below that, queueing binds when it dominates the TTFT tail.
    overloaded = good.saturation_rps > 0 and run.rate_rps > good.saturation_rps
    if overloaded or (
        run.percentile("queue", 99) >= th.SERVING_QUEUEING_SHARE_PCT / 100 * run.percentile("ttft", 99)
    ):
        found.append("queueing")
    kv_full = run.mean_decode_batch >= th.SERVING_KV_BOUND_PCT / 100 * replica.capacity.max_sequences
    if run.preemptions or kv_full:
        found.append("kv-capacity-bound")
    if input_time_share(replica, run) * 100 >= th.SERVING_PREFILL_BOUND_PCT:
        found.append("prefill-bound")
    else:
        w = replica.workload
        step = replica.model.step(
            max(run.mean_decode_batch, 1.0),
            decode_seqs=max(run.mean_decode_batch, 1.0),
            decode_context=w.seq_len + w.output_len / 2,
        )
        found.append("decode-compute-bound" if step.bound == "compute" else "decode-bandwidth-bound")
    if good.binding.startswith("ttft") and "queueing" not in found and "prefill-bound" not in found:
        found.insert(0, "prefill-bound")
    return tuple(found)
