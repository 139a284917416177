"""One cause, one claim: a trace's findings as a causal chain, their gains bounded together.

Rules judge one piece of evidence each, so several can claim the same lost time: on the 8-rank DLRM
trace ``comm_bound``, ``straggler`` and ``sync_bound`` each claimed the wait for rank 7 (≈ 3.8× together).
After the rules run, `chain_findings`:

1. lets a cause explain its effects: a straggler explains the other ranks' communication wait and the
   syncs that wait on it; blocking calls and the other causes explain ``low_utilization``'s idle time.
   An explained finding keeps its numbers, names its cause (``metrics["explained_by"]``) and keeps only the
   gain beyond it;
2. bounds the gains of every idle-time finding of the trace together: removing the idle and exposed
   communication they explain (share E of the step, the largest over the ranks) can speed a step up by at
   most 1 / (1 − E); when the product of their gains is larger, each is scaled down (geometrically) so the
   product meets the bound. Compute-speed findings (``no_mixed_precision``) claim compute time, not idle,
   and are left alone;
3. says what the evidence cannot show: a partial rank set ("3 of 8 ranks; the slowest may be missing"),
   a single-step trace, a trace of mostly start-up; confidence follows.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Confidence, Finding, Gain

__all__ = ["IDLE_FINDINGS", "chain_findings", "combined_gain_x", "explained_share_pct", "gain_x"]

# Findings whose gain is recovered idle or exposed-communication time (the bound applies to these).
IDLE_FINDINGS = frozenset(
    {
        "sync_bound",
        "launch_bound",
        "input_bound",
        "comm_bound",
        "straggler",
        "low_utilization",
        "small_batch",
        "pageable_copies",
        "step_outliers",
    }
)
# A straggler's late arrival is what its peers' collective waits and syncs measure.
_STRAGGLER_EXPLAINS = ("comm_bound", "sync_bound")
# Causes whose idle low_utilization's summary covers ("the other findings say where the rest goes").
_IDLE_CAUSES = ("sync_bound", "launch_bound", "input_bound", "comm_bound", "straggler")
_LOWER: dict[Confidence, Confidence] = {"high": "medium", "medium": "low", "low": "low"}


def gain_x(f: Finding) -> float:
    """The finding's upper gain as a speed-up factor (a step-time saving p % is 1 / (1 − p/100)); 1.0 for
    other metrics (memory, cost) and no gain."""
    g = f.gain
    if g is None:
        return 1.0
    if g.metric == "throughput_x":
        return max(g.high, 1.0)
    if g.metric == "step_time_pct":
        return 1.0 / (1.0 - min(max(g.high, 0.0), T.MAX_REMOVABLE_STEP_PCT) / 100.0)
    return 1.0


def combined_gain_x(findings: list[Finding]) -> float:
    """The idle-time findings' gains combined (their product): what following all of them promises."""
    return math.prod(gain_x(f) for f in findings if f.id in IDLE_FINDINGS)


def explained_share_pct(evidence: list[Evidence]) -> float | None:
    """The largest share of a step (over the ranks) that is GPU idle or exposed communication, capped at
    ``MAX_REMOVABLE_STEP_PCT``: all the idle-time findings together can remove at most this."""
    shares = [
        (ev.activity.gpu_idle_pct or 0.0) + (ev.comm.comm_exposed_pct or 0.0)
        for ev in evidence
        if ev.activity.gpu_idle_pct is not None or ev.comm.comm_exposed_pct is not None
    ]
    return min(max(shares), T.MAX_REMOVABLE_STEP_PCT) if shares else None


def _with_gain_x(f: Finding, high_x: float, note: str) -> Finding:
    """``f`` with its upper gain set to ``high_x`` (as a speed-up, or back to a step-time share)."""
    g = f.gain
    if g is None:
        return f
    if g.metric == "throughput_x":
        high = max(math.floor(high_x * 1000) / 1000, 1.0)  # rounded down: a bound is never exceeded
        new = Gain(g.metric, min(round(g.low, 3), high), high, _joined(g.note, note))
    elif g.metric == "step_time_pct":
        pct = max(math.floor(100.0 * (1.0 - 1.0 / high_x) * 100) / 100, 0.0)
        new = Gain(g.metric, min(round(g.low, 2), pct), pct, _joined(g.note, note))
    else:
        return f
    return replace(f, gain=new)


def _joined(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def _explain(f: Finding, cause: Finding, why: str) -> Finding:
    """``f`` explained by ``cause``: named in its metrics and summary, its gain only what lies beyond."""
    beyond = max(1.0, gain_x(f) / max(gain_x(cause), 1.0))
    out = replace(
        f,
        summary=f"{f.summary} {why}",
        metrics={**f.metrics, "explained_by": cause.id},
        severity="low"
        if beyond < T.EXPLAINED_RESIDUAL_GAIN_X and f.severity in ("critical", "high", "medium")
        else f.severity,
    )
    return _with_gain_x(out, beyond, f"beyond what {cause.id} claims")


def _causal(findings: list[Finding]) -> list[Finding]:
    """Step 1 of the module docstring."""
    by_id = {f.id: f for f in findings}
    straggler = by_id.get("straggler")
    out = []
    for f in findings:
        if straggler is not None and f.id in _STRAGGLER_EXPLAINS:
            rank = straggler.metrics.get("straggler_rank")
            f = _explain(f, straggler, f"Much of this is waiting for rank {rank} (see straggler).")
        elif f.id == "low_utilization":
            causes = [c for c in _IDLE_CAUSES if c in by_id]
            if causes:
                beyond = max(1.0, gain_x(f) / math.prod(gain_x(by_id[c]) for c in causes))
                fully = beyond < T.EXPLAINED_RESIDUAL_GAIN_X
                f = replace(
                    f,
                    metrics={**f.metrics, "explained_by": causes},
                    severity="low" if fully else f.severity,
                )
                f = _with_gain_x(f, beyond, "beyond the causes listed with it")
        out.append(f)
    return out


def _bounded(findings: list[Finding], share_pct: float | None) -> list[Finding]:
    """Step 2 of the module docstring."""
    if share_pct is None:
        return findings
    bound = 1.0 / (1.0 - share_pct / 100.0)
    total = combined_gain_x(findings)
    if total <= bound or total <= 1.0:
        return findings
    alpha = math.log(bound) / math.log(total)
    note = (
        f"scaled so all idle-time findings together stay within {bound:.2f}× "
        f"({share_pct:.0f} % idle or exposed)"
    )
    return [
        _with_gain_x(f, gain_x(f) ** alpha, note) if f.id in IDLE_FINDINGS and gain_x(f) > 1.0 else f
        for f in findings
    ]


def _caveats(evidence: list[Evidence]) -> tuple[str, bool]:
    """(what the evidence cannot show, whether timing findings lose a confidence level)."""
    ranks = [ev for ev in evidence if ev.label != "cross-rank"]
    steps = [ev.steps.num_steps for ev in ranks if ev.steps.num_steps is not None]
    start_up = [ev.activity.one_off_idle_pct for ev in ranks if ev.activity.one_off_idle_pct is not None]
    if start_up and max(start_up) >= T.START_UP_ONLY_PCT:
        return (
            f" This trace is mostly start-up (one-off gaps {max(start_up):.0f} % of it): the steady state "
            "may differ.",
            True,
        )
    if steps and max(steps) == 1:
        return " One step was traced: its steady state is not confirmed by a second.", True
    return "", False


def _partial(f: Finding, evidence: list[Evidence]) -> Finding:
    """A straggler or communication finding on a partial rank set says so, with low confidence."""
    cross = [ev for ev in evidence if ev.label == "cross-rank"]
    if not cross or f.id not in ("straggler", "comm_bound"):
        return f
    world, seen = cross[0].comm.world_size, len(cross[0].comm.rank_step_time_s)
    if not world or seen >= world:
        return f
    return replace(
        f,
        summary=f"{f.summary} Only {seen} of {world} ranks are in this trace: the slowest may be missing.",
        confidence="low",
        metrics={**f.metrics, "ranks_seen": seen, "world_size": world},
    )


def chain_findings(findings: list[Finding], evidence: list[Evidence]) -> list[Finding]:
    """The trace's findings, chained, bounded together and caveated (module docstring); the order kept."""
    out = _bounded(_causal(findings), explained_share_pct(evidence))
    caveat, lower = _caveats(evidence)
    result = []
    for f in out:
        f = _partial(f, evidence)
        if caveat and f.id in IDLE_FINDINGS:
            f = replace(
                f, summary=f.summary + caveat, confidence=_LOWER[f.confidence] if lower else f.confidence
            )
        result.append(f)
    return result
