"""The planner's one door to the models: memory (gpuwise.memory), speed (gpuwise.perf), cost
(gpuwise.perf.cost). Each (workload, GPU) pair is evaluated once per plan and cached, because
the planner asks the same question many times while it searches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwise.catalog import GPU, get_gpu
from gpuwise.errors import GpuwiseError
from gpuwise.perf.prediction import Bound
from gpuwise.plan.types import Outcome
from gpuwise.workload import Workload


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
        return self.predict(workload).outcome

    def outcome_on(self, workload: Workload, gpu: GPU) -> Outcome:
        return self.predict(workload, gpu).outcome

    def memory_dict(self, workload: Workload) -> dict[str, Any]:
        return self.predict(workload).memory.to_dict()


def _predict(w: Workload, gpu: GPU, full: bool = False) -> Prediction:
    from gpuwise.memory import estimate_memory

    memory = estimate_memory(w, gpu)
    capacity = int(memory.gpu_memory_bytes)
    peak = int(
        memory.device_total_bytes
    )  # what nvidia-smi would show: reserved + CUDA context (+ paged state)
    fits = bool(memory.fits)
    if not fits and not full:
        outcome = Outcome(
            gpu=gpu.id,
            num_gpus=w.num_gpus,
            fits=False,
            peak_bytes=peak,
            capacity_bytes=capacity,
            headroom_pct=round(memory.headroom_pct, 2),
            throughput_unit="images/s" if w.is_cv else ("output tokens/s" if w.is_inference else "tokens/s"),
        )
        parts = memory.breakdown
        return Prediction(
            outcome=outcome,
            memory=memory,
            perf=None,
            weight_bytes=int(parts.get("weights", 0)) or None,
            kv_cache_bytes=int(parts["kv_cache"]) if parts.get("kv_cache") else None,
        )
    from gpuwise.perf import predict
    from gpuwise.perf.cost import estimate_cost, gpu_price

    perf = predict(w, gpu)
    inf, tr = perf.inference, perf.training
    price = gpu_price(gpu, w)
    usd_hour = usd_1m = usd_run = run_s = None
    # Vision models: the performance model counts patch tokens; people count images.
    throughput = perf.samples_per_s if w.is_cv else perf.tokens_per_s
    if price.usd_per_gpu_hour is not None and fits and throughput > 0:
        cost = estimate_cost(w, gpu, perf=perf)
        usd_hour = cost.usd_per_hour
        if w.is_cv:
            util = (
                w.utilization_pct or 100.0
            ) / 100.0  # as gpuwise.perf.cost: idle paid time stretches the job
            usd_1m = usd_hour / (throughput * util * 3600) * 1e6
        elif cost.training is not None:
            usd_1m = cost.training.usd_per_billion_tokens / 1000.0
            usd_run, run_s = cost.training.run_cost_usd, cost.training.run_time_s
        elif cost.serving is not None:
            usd_1m = cost.serving.usd_per_million_output_tokens
    comm_pct = None
    if tr is not None and tr.step_time_s > 0:
        comm_pct = 100.0 * (tr.dp_exposed_s + tr.tp_comm_s) / tr.step_time_s
    elif inf is not None and inf.tpot_s > 0 and inf.tp_comm_per_step_s:
        comm_pct = 100.0 * inf.tp_comm_per_step_s / inf.tpot_s
    outcome = Outcome(
        gpu=gpu.id,
        num_gpus=w.num_gpus,
        fits=fits,
        peak_bytes=peak,
        capacity_bytes=capacity,
        headroom_pct=round(memory.headroom_pct, 2),
        throughput=throughput if fits else None,
        throughput_unit="images/s" if w.is_cv else ("output tokens/s" if inf is not None else "tokens/s"),
        step_time_s=perf.step_time_s,
        mfu_pct=perf.mfu_pct if w.is_training or w.is_cv else None,
        ttft_ms=inf.ttft_s * 1000 if inf is not None else None,
        tpot_ms=inf.tpot_s * 1000 if inf is not None else None,
        max_concurrency=inf.max_concurrency if inf is not None else None,
        bound=perf.bound,
        comm_exposed_pct=comm_pct,
        usd_per_hour=usd_hour,
        run_time_s=run_s,
        usd_per_run=usd_run,
        usd_per_1m=usd_1m,
    )
    parts = memory.breakdown
    phases: dict[str, float] = {}
    if tr is not None:
        phases = {
            "optimizer": tr.optimizer_s
        }  # the model times the update separately; forward/backward it does not split
    return Prediction(
        outcome=outcome,
        memory=memory,
        perf=perf,
        weight_bytes=int(parts.get("weights", 0)) or None,
        kv_cache_bytes=int(parts["kv_cache"]) if parts.get("kv_cache") else None,
        decode_bound=inf.decode_bound if inf is not None else None,
        phase_s=phases,
        assumptions=tuple(perf.assumptions),
    )


__all__ = ["Evaluator", "Prediction"]
