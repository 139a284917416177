"""What "better" means for each goal: one number per outcome, higher is better.

cost        $ per 1M tokens (or images); GPU-seconds per token when a GPU has no price
latency     per-token latency for inference (TPOT), time per token for training
throughput  tokens (images) per second of the whole job
fit         free memory until there is enough of it, then throughput
"""

from __future__ import annotations

from gpuwise.diagnose import thresholds as T
from gpuwise.plan.types import Outcome
from gpuwise.workload import Workload
from gpuwise.workload.spec import Goal

__all__ = ["comfortable", "goal_metric_name", "goal_value", "gpu_seconds_per_unit", "relative_gain_pct"]


def comfortable(outcome: Outcome) -> bool:
    """Fits with the headroom the rule engine asks for (no oom_risk finding)."""
    return outcome.fits and outcome.headroom_pct >= T.OOM_HEADROOM_PCT


def gpu_seconds_per_unit(outcome: Outcome) -> float | None:
    """GPU-seconds per token (or image) at the outcome's throughput, None without one."""
    if not outcome.throughput:
        return None
    return outcome.num_gpus / outcome.throughput


def goal_value(outcome: Outcome, goal: Goal, workload: Workload) -> float:
    """Higher is better. -inf when the outcome has no number for the goal (e.g. does not fit)."""
    if not outcome.fits:
        return float("-inf")
    if goal == "fit" and not comfortable(outcome):
        return outcome.headroom_pct - 1e6  # below every comfortable outcome, ordered by headroom
    if goal == "cost":
        if outcome.usd_per_1m is not None:
            return -outcome.usd_per_1m
        per_unit = gpu_seconds_per_unit(outcome)
        return (
            float("-inf") if per_unit is None else -per_unit
        )  # no price: GPU time (hardware lists put priced GPUs first)
    if goal == "latency":
        if workload.is_inference and outcome.tpot_ms is not None:
            return -outcome.tpot_ms
        if outcome.throughput:
            return outcome.throughput  # training: time per token
        return float("-inf")
    return outcome.throughput if outcome.throughput else float("-inf")


def goal_metric_name(goal: Goal, workload: Workload) -> str:
    """What the goal optimizes, in words for this workload (e.g. "$ per 1M tokens")."""
    if goal == "cost":
        return "$ per 1M " + ("images" if workload.is_cv else "tokens")
    if goal == "latency":
        return (
            "per-token latency (TPOT)"
            if workload.is_inference and not workload.is_cv
            else "time per " + ("image" if workload.is_cv else "token")
        )
    if goal == "fit":
        return "memory headroom, then throughput"
    return "images/s" if workload.is_cv else "tokens/s"


def relative_gain_pct(before: Outcome, after: Outcome, goal: Goal, workload: Workload) -> float | None:
    """How much better `after` is for the goal, in % (positive = better); None if not comparable."""
    b, a = goal_value(before, goal, workload), goal_value(after, goal, workload)
    if b == float("-inf") or a == float("-inf"):
        return None
    if goal == "fit" and not (comfortable(before) and comfortable(after)):
        return after.headroom_pct - before.headroom_pct
    if b == 0:
        return None
    return (
        100.0 * (a - b) / abs(b)
    )  # costs and latencies are negated, so this reads "% better" for every goal
