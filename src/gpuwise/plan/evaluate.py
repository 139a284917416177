"""The planner's one door to the models: memory (gpuwise.memory), speed (gpuwise.perf), cost
(gpuwise.perf.cost). Each (workload, GPU) pair is evaluated once per plan and cached, because
the planner asks the same question many times while it searches.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gpuwise.catalog import GPU, get_gpu
from gpuwise.errors import GpuwiseError
from gpuwise.perf.prediction import Bound
from gpuwise.plan.goal import comfortable
from gpuwise.plan.types import Outcome, ThroughputUnit
from gpuwise.workload import Workload

if TYPE_CHECKING:  # imported when first used: start-up of commands that never predict stays short
    from gpuwise.memory import MemoryEstimate
    from gpuwise.perf import PerfPrediction


@dataclass(frozen=True)
class Prediction:
    """Everything the planner reads from the models for one workload on one GPU."""

    outcome: Outcome
    memory: Any  # gpuwise.memory.MemoryEstimate
    perf: Any  # gpuwise.perf.PerfPrediction; None when it does not fit and speed was not asked for
    weight_bytes: int | None = None  # per GPU
    kv_cache_bytes: int | None = None  # per GPU at the memory peak
    decode_bound: Bound | None = None  # inference: what limits a decode step
    phase_s: dict[str, float] = field(default_factory=dict)  # training: forward, backward, optimizer, other
    assumptions: tuple[str, ...] = ()


def larger_batch_speedup_x(ev: Evaluator, w: Workload) -> float | None:
    """Throughput at 4x (else 2x) the micro-batch over today's, both on a busy GPU, when that batch fits
    comfortably; None when it does not or there is no speed to compare. The small_batch rule reads it:
    free memory and low utilization say "raise the batch" only if the kernels would get faster."""
    if not (w.is_training or w.task == "cv-inference"):
        return None
    now = ev.outcome(w)
    if not now.fits or not now.throughput:
        return None
    for factor in (4, 2):
        try:
            bigger = w.with_changes(batch_size=w.batch_size * factor)
        except GpuwiseError:
            continue
        after = ev.outcome(bigger)
        if comfortable(after) and after.throughput:
            return after.throughput / now.throughput
    return None


def attention_scores_bytes(ev: Evaluator, w: Workload) -> int | None:
    """Memory the S×S attention scores take: the peak with this attention minus the peak with
    FlashAttention (which never materializes them), both from the memory model."""
    if w.attention == "flash" or w.is_cv or w.precision == "fp32":
        return None
    try:
        flash = w.with_changes(attention="flash")
    except GpuwiseError:
        return None
    saved = ev.predict(w).outcome.peak_bytes - ev.predict(flash).outcome.peak_bytes
    return max(0, int(saved))


class Evaluator:
    """Memoized memory + speed + cost for (workload, GPU)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Workload, GPU], Prediction] = {}

    def predict(self, workload: Workload, gpu: GPU | None = None, full: bool = False) -> Prediction:
        """Memory always; speed and cost only when the job fits (or `full`): the planner's searches
        try many edits that do not fit, and their speed is never shown."""
        gpu = gpu or get_gpu(workload.gpu)
        key = (workload, gpu)
        hit = self._cache.get(key)
        if hit is None or (full and hit.perf is None):
            hit = self._cache[key] = _predict(workload, gpu, full)
        return hit

    def outcome(self, workload: Workload) -> Outcome:
        """The predicted Outcome of `workload` on its own GPU (memoized)."""
        return self.predict(workload).outcome

    def outcome_on(self, workload: Workload, gpu: GPU) -> Outcome:
        """The predicted Outcome of `workload` on `gpu` (e.g. the same GPU with its NVLink removed)."""
        return self.predict(workload, gpu).outcome

    def memory_dict(self, workload: Workload) -> dict[str, Any]:
        """The memory estimate of `workload` in its JSON form (bytes per component, fits, ...)."""
        return self.predict(workload).memory.to_dict()


def _predict(w: Workload, gpu: GPU, full: bool = False) -> Prediction:
    from gpuwise.memory import estimate_memory

    memory = estimate_memory(w, gpu)
    parts = memory.breakdown
    weight_bytes = int(parts.get("weights", 0)) or None
    kv_cache_bytes = int(parts["kv_cache"]) if parts.get("kv_cache") else None
    if not memory.fits and not full:
        unit: ThroughputUnit = (
            "images/s" if w.is_cv else ("output tokens/s" if w.is_inference else "tokens/s")
        )
        outcome = _memory_outcome(w, gpu, memory, unit)
        return Prediction(outcome, memory, None, weight_bytes, kv_cache_bytes)
    from gpuwise.perf import predict

    perf = predict(w, gpu, memory=memory)
    inf, tr = perf.inference, perf.training
    unit = "images/s" if w.is_cv else ("output tokens/s" if inf is not None else "tokens/s")
    # Vision models: the performance model counts patch tokens; people count images.
    throughput = perf.samples_per_s if w.is_cv else perf.tokens_per_s
    money = _money(w, gpu, perf, throughput) if memory.fits else _Money()
    outcome = replace(
        _memory_outcome(w, gpu, memory, unit),
        throughput=throughput if memory.fits else None,
        step_time_s=perf.step_time_s,
        mfu_pct=perf.mfu_pct if w.is_training or w.is_cv else None,
        mfu_compute_dtype_pct=perf.mfu_compute_dtype_pct if w.is_training or w.is_cv else None,
        compute_dtype=perf.compute_dtype,
        ttft_ms=inf.ttft_s * 1000 if inf is not None else None,
        tpot_ms=inf.tpot_s * 1000 if inf is not None else None,
        max_concurrency=inf.max_concurrency if inf is not None else None,
        bound=perf.bound,
        comm_exposed_pct=_comm_exposed_pct(perf),
        usd_per_hour=money.usd_per_hour,
        run_time_s=money.run_time_s,
        usd_per_run=money.usd_per_run,
        usd_per_1m=money.usd_per_1m,
    )
    # The model times the optimizer update separately; forward/backward it does not split.
    phases = {"optimizer": tr.optimizer_s} if tr is not None else {}
    return Prediction(
        outcome=outcome,
        memory=memory,
        perf=perf,
        weight_bytes=weight_bytes,
        kv_cache_bytes=kv_cache_bytes,
        decode_bound=inf.decode_bound if inf is not None else None,
        phase_s=phases,
        assumptions=tuple(perf.assumptions),
    )


def _memory_outcome(w: Workload, gpu: GPU, memory: MemoryEstimate, unit: ThroughputUnit) -> Outcome:
    """The outcome as far as memory tells: no speed, no money."""
    return Outcome(
        gpu=gpu.id,
        num_gpus=w.num_gpus,
        fits=bool(memory.fits),
        # What nvidia-smi would show: reserved + CUDA context (+ paged state).
        peak_bytes=int(memory.device_total_bytes),
        capacity_bytes=int(memory.gpu_memory_bytes),
        headroom_pct=round(memory.headroom_pct, 2),
        throughput_unit=unit,
    )


@dataclass(frozen=True)
class _Money:
    usd_per_hour: float | None = None
    usd_per_1m: float | None = None
    usd_per_run: float | None = None
    run_time_s: float | None = None


def _money(w: Workload, gpu: GPU, perf: PerfPrediction, throughput: float) -> _Money:
    """$ per hour, per 1M tokens (or images) and per run of a job that fits; empty without a price."""
    from gpuwise.perf.cost import estimate_cost, gpu_price

    if gpu_price(gpu, w).usd_per_gpu_hour is None or throughput <= 0:
        return _Money()
    cost = estimate_cost(w, gpu, perf=perf)
    if w.is_cv:
        # As gpuwise.perf.cost: idle paid time stretches the job.
        util = (w.utilization_pct or 100.0) / 100.0
        return _Money(cost.usd_per_hour, cost.usd_per_hour / (throughput * util * 3600) * 1e6)
    if cost.training is not None:
        t = cost.training
        return _Money(cost.usd_per_hour, t.usd_per_billion_tokens / 1000.0, t.run_cost_usd, t.run_time_s)
    if cost.serving is not None:
        return _Money(cost.usd_per_hour, _serving_usd_per_million_output(w, gpu, perf, cost.serving))
    return _Money(cost.usd_per_hour)


def _serving_usd_per_million_output(w: Workload, gpu: GPU, perf: PerfPrediction, fallback: Any) -> float:
    """The whole bill per 1M output tokens, from ``gpuwise.serving.economics`` for LLM serving on the
    workload's own GPU (the figure ``cost`` shows), else the prediction's serving cost."""
    from gpuwise.serving.demand import request_rate
    from gpuwise.serving.economics import is_llm_serving, serving_cost, serving_economics

    # a demand is planned by the serving plan; here, the GPUs at their concurrency (no simulation)
    if w.gpu == gpu.id and is_llm_serving(w) and request_rate(w) is None:
        econ = serving_economics(w, perf=perf)
        cost = serving_cost(econ) if econ is not None else None
        if cost is not None:
            return cost.usd_per_million_output_tokens
    return float(fallback.usd_per_million_output_tokens)


def _comm_exposed_pct(perf: PerfPrediction) -> float | None:
    """Communication not hidden behind compute, as a share of the step (or of a decode step)."""
    tr, inf = perf.training, perf.inference
    if tr is not None and tr.step_time_s > 0:
        return 100.0 * (tr.dp_exposed_s + tr.tp_comm_s) / tr.step_time_s
    if inf is not None and inf.tpot_s > 0 and inf.tp_comm_per_step_s:
        return 100.0 * inf.tp_comm_per_step_s / inf.tpot_s
    return None


__all__ = ["Evaluator", "Prediction", "attention_scores_bytes", "larger_batch_speedup_x"]
