"""A load test as Evidence (source "loadtest"): one level's measured figures, for `plan --evidence`.

A load test has several levels (a sweep, or the probes of a max-rate search); the evidence describes the
one the plan should hold to its SLO: the most loaded level of a sweep, or the highest probed rate that met
the load test's SLO (else the lowest probe). The lightest level's TTFT p50 is kept as the TTFT with no
queue, so a rule can tell queueing from a slow prefill.
"""

from __future__ import annotations

from typing import Any

from gpuwise.diagnose.evidence import Evidence, RunContext, ServingLoad
from gpuwise.loadtest.metrics import METRICS, PERCENTILES
from gpuwise.loadtest.prediction import in_flight
from gpuwise.loadtest.types import LevelSummary, LoadtestResult, level_label


def chosen_level(result: LoadtestResult) -> LevelSummary | None:
    """The level the evidence describes (see the module docstring); None when no request succeeded."""
    if result.search is not None:
        probes = [p for p in result.search.probes if p.requests_ok]
        met = [p for p in probes if p.slo_met]
        if met:
            return max(met, key=lambda p: p.target)
        return min(probes, key=lambda p: p.target, default=None)
    levels = [lv for lv in result.levels if lv.requests_ok]
    return max(levels, key=in_flight, default=None)  # the most requests in flight


def _declared(result: LoadtestResult) -> dict[str, Any] | None:
    pred = result.prediction
    if not pred:
        return None
    return {k: pred.get(k) for k in ("model", "workload", "precision", "gpu", "num_gpus", "tp", "engine")}


def loadtest_evidence(result: LoadtestResult) -> Evidence | None:
    """The load test in the rule engine's terms; None when no level has a successful request."""
    level = chosen_level(result)
    if level is None:
        return None
    all_levels = result.search.probes if result.search else result.levels
    ok_levels = [lv for lv in all_levels if lv.requests_ok]
    lightest = min(ok_levels, key=in_flight)
    latency = {f"{m}_p{p}": v for m in METRICS for p in PERCENTILES if (v := level.pct(m, p)) is not None}
    ev = Evidence(
        source="loadtest",
        label=f"loadtest run {result.run_id}" if result.run_id is not None else f"loadtest {result.url}",
        device="http",
        context=RunContext(workload_kind="serving"),
        serving=ServingLoad(
            serving_run_id=result.run_id,
            serving_level=level_label(level.mode, level.target),
            serving_levels=len(all_levels),
            serving_offered_rate_rps=None
            if level.mode == "concurrency"
            else (level.offered_rate_per_s or level.target),  # what the seeded schedule offered
            serving_concurrency=in_flight(level),
            serving_requests=level.requests_sent,
            serving_requests_ok=level.requests_ok,
            serving_errors=dict(level.errors),
            serving_duration_s=level.duration_s,
            serving_latency_s=latency,
            serving_ttft_unloaded_s=lightest.pct("ttft", 50) if lightest is not level else None,
            serving_request_throughput_rps=level.request_throughput_per_s,
            serving_output_tokens_per_s=level.output_token_throughput_per_s,
            serving_total_tokens_per_s=level.total_token_throughput_per_s,
            serving_prompt_tokens_mean=level.input_tokens / level.requests_ok,
            serving_output_tokens_mean=level.output_tokens / level.requests_ok,
            serving_model=result.model,
            serving_url=result.url,
            serving_declared=_declared(result),
        ),
    )
    if result.search is not None:
        search = result.search  # the offered rate of the answer's schedules, else its nominal rate
        ev.serving.serving_max_rate_rps = search.offered_rate_per_s or search.max_rate_per_s
        ev.serving.serving_max_rate_at_least = result.search.bounded_by_high
    if result.slo is not None:
        ev.serving.serving_slo_s = {f"{m}_p{p}": v for (m, p), v in result.slo.limits.items()}
    if result.interrupted:
        ev.notes.append("the load test was interrupted (Ctrl-C): its last level may be short")
    return ev


__all__ = ["chosen_level", "loadtest_evidence"]
