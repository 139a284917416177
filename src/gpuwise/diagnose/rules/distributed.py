"""Distributed rules: exposed communication and the straggler rank.

A straggler hides in synchronous training: collectives make every rank's step equally long, so the
late rank shows up as the one that waits least inside the collectives. Times are seconds per step;
shares are % of the step.
"""

from __future__ import annotations

import math
import statistics

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding, Gain
from gpuwise.diagnose.rules.common import confidence, on_gpu, severity_for_gain, speedup_from_saving
from gpuwise.diagnose.rules.host import machine_busy

__all__ = ["comm_bound", "straggler"]


# (fix, snippet) by "is training": data-parallel gradients can skip and bucket their all-reduces; a model
# split for inference (tensor/pipeline parallel) can only keep its collectives on fast links or split less.
_COMM_FIX: dict[bool, tuple[str, str]] = {
    True: (
        "Overlap and reduce communication: gradient accumulation with no_sync, larger DDP buckets, FSDP "
        "prefetch; keep tensor parallelism inside an NVLink domain.",
        "with model.no_sync():            # skip all-reduce on accumulation micro-steps\n"
        "    loss.backward()\n"
        "DDP(model, bucket_cap_mb=100, gradient_as_bucket_view=True)\n"
        "FSDP(model, forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE)",
    ),
    False: (
        "Reduce exposed communication: keep tensor parallelism inside an NVLink domain, split the model "
        "over fewer GPUs (pipeline or replicas instead), or overlap collectives with compute.",
        "vllm serve MODEL --tensor-parallel-size 4   # within one NVLink domain",
    ),
}


def comm_bound(ev: Evidence) -> Finding | None:
    """Collective communication runs with no compute at least ``COMM_EXPOSED_MODERATE_PCT`` of the
    step (``comm_exposed_pct``): overlap it, or keep tensor parallelism inside an NVLink domain. Training
    gets the data-parallel levers (no_sync, buckets, FSDP prefetch); other kinds the model-split ones."""
    share = ev.comm.comm_exposed_pct
    if share is None or share < T.COMM_EXPOSED_MODERATE_PCT:
        return None
    return Finding(
        id="comm_bound",
        title="Communication is not hidden behind compute",
        severity="high" if share >= T.COMM_EXPOSED_HIGH_PCT else "medium",
        confidence=confidence(ev),
        category="communication",
        summary=f"{share:.0f} % of the step is collective communication with no compute running"
        + (
            f" ({ev.comm.comm_overlap_pct:.0f} % of communication overlaps compute)"
            if ev.comm.comm_overlap_pct is not None
            else ""
        )
        + ".",
        metrics={"comm_exposed_pct": round(share, 2), "comm_overlap_pct": ev.comm.comm_overlap_pct},
        fix=_COMM_FIX[ev.kind == "training"][0],
        fix_snippet=_COMM_FIX[ev.kind == "training"][1],
        gain=Gain(
            "throughput_x",
            1.0 + share / 200,
            speedup_from_saving(share * 0.7),
            "exposed communication overlapped or removed",
        ),
        source=ev.source,
        tools=("NCCL", "torch.distributed"),
    )


def straggler(ev: Evidence) -> Finding | None:
    """One rank's step is ``STRAGGLER_MODERATE_PCT`` longer than the median rank's, or (from the
    collective waits, ``rank_comm_time_s``) one rank arrives last and the others wait for it."""
    ranks = ev.comm.rank_step_time_s
    if len(ranks) < 2:
        return None
    median = statistics.median(ranks.values())
    slow_rank, slow = max(ranks.items(), key=lambda kv: kv[1])
    if median <= 0:
        return None
    skew_pct = 100.0 * (slow - median) / median
    comm = ev.comm.rank_comm_time_s
    if len(comm) >= 2 and max(comm.values()) > 0:
        # Collectives pace synchronous ranks alike: step times then differ by where each rank's profile
        # window began (PARAM DLRM: the rank that enters first waits longest and looks slowest). Who
        # waits least inside the collectives is the rank the others wait for.
        by_wait = _straggler_by_comm_wait(ev, median, skew_pct, slow_rank)
        others = [v for r, v in comm.items() if r != slow_rank]
        if by_wait is not None or (
            slow_rank in comm and others and comm[slow_rank] > statistics.median(others)
        ):
            return by_wait  # the longest step is mostly waiting in collectives: not the straggler
    if skew_pct < T.STRAGGLER_MODERATE_PCT:
        return None
    return Finding(
        id="straggler",
        title=f"Rank {slow_rank} is a straggler",
        severity=severity_for_gain(
            "high" if skew_pct >= T.STRAGGLER_HIGH_PCT else "medium", 1.0 + skew_pct / 100
        ),
        confidence=confidence(ev),
        category="distributed",
        summary=f"Rank {slow_rank} takes {slow * 1000:.1f} ms per step vs a median of {median * 1000:.1f} ms "
        f"(+{skew_pct:.0f} %); "
        "every other rank waits for it at each collective.",
        metrics={
            "straggler_rank": slow_rank,
            "rank_step_time_s": {str(k): v for k, v in ranks.items()},
            "skew_pct": round(skew_pct, 2),
        },
        fix=(
            "Check that rank's node: input shard size, data loader, thermal/power throttling, a slower GPU "
            "or link."
        ),
        fix_snippet="nvidia-smi -q -d PERFORMANCE   # on the straggler's node",
        # every rank waits for the slowest, so the group steps at its pace: at the median pace it gains
        # slow/median (high); the low end keeps half of it for the part of the gap that was real work
        gain=Gain(
            "throughput_x",
            round(1.0 + skew_pct / 200, 3),
            round(1.0 + skew_pct / 100, 3),
            "the group steps at the slowest rank's pace: all ranks at the median pace (high), half the gap "
            "closed (low)",
        ),
        source=ev.source,
    )


def _straggler_context(step_s: float, skew_pct: float, slow_rank: int, late: int) -> str:
    """The opening sentence: how the ranks' step times relate to the late rank found by waiting."""
    if skew_pct < T.STRAGGLER_MODERATE_PCT:
        return (
            f"Step times are equal ({step_s * 1000:.3g} ms, within {skew_pct:.1f} %): "
            "collectives synchronize the ranks. "
        )
    if slow_rank == late:
        return f"Rank {late} also has the longest step (+{skew_pct:.0f} % vs the median). "
    return (
        f"Rank {slow_rank}'s step looks {skew_pct:.0f} % longer than the median, but that is waiting: "
        "it sits longer in collectives than the others (profile windows that start apart make "
        "synchronized steps look unequal). "
    )


def _straggler_by_comm_wait(ev: Evidence, step_s: float, skew_pct: float, slow_rank: int) -> Finding | None:
    """Synchronous training hides a straggler's step time (collectives make every rank's step equal):
    the late rank shows up instead as the one that waits least inside each collective."""
    comm = ev.comm.rank_comm_time_s
    late = min(comm, key=comm.__getitem__)
    others = statistics.median(v for r, v in comm.items() if r != late)
    gap_s = others - comm[late]
    consistent = _steps_late(ev, late)
    if consistent is not None:
        gap_s, late_pct = consistent[0], consistent[1]
        if late_pct < T.STRAGGLER_CONSISTENT_STEPS_PCT:
            return None  # late in some steps only: the machine's noise, not a rank that is always behind
    gap_pct = 100.0 * gap_s / step_s
    if gap_pct < T.STRAGGLER_COMM_GAP_PCT:
        return None
    busy = machine_busy(ev)
    return Finding(
        id="straggler",
        title=f"Rank {late} is likely a straggler: the other ranks wait for it",
        severity=severity_for_gain(
            "high" if gap_pct >= T.STRAGGLER_HIGH_PCT else "medium", speedup_from_saving(gap_pct)
        ),
        confidence="low" if busy else "medium",  # inferred from who waits, not from its own step time
        category="distributed",
        summary=_straggler_context(step_s, skew_pct, slow_rank, late)
        + f"Rank {late} spends {comm[late] * 1000:.3g} ms per step in collectives vs {others * 1000:.3g} ms "
        f"on the other {len(comm) - 1} rank(s): it arrives last, and the others wait about "
        f"{gap_s * 1000:.3g} ms per step for it ({gap_pct:.0f} % of the step)"
        + (f", in {consistent[1]:.0f} % of the steps." if consistent is not None else ".")
        + (
            f" Meanwhile {busy}: a rank the machine gives less CPU lags the same way; check again on a "
            "quiet machine."
            if busy
            else ""
        ),
        metrics={
            "straggler_rank": late,
            "rank_step_time_s": {str(k): v for k, v in ev.comm.rank_step_time_s.items()},
            "rank_comm_time_s": {str(k): v for k, v in comm.items()},
            "comm_wait_gap_s": gap_s,
            "comm_wait_gap_pct": round(gap_pct, 2),
            "late_steps_pct": None if consistent is None else round(consistent[1], 1),
            "comm_wait_gap_iqr_pct": None if consistent is None else _iqr_pct(consistent[2], step_s),
            "skew_pct": round(skew_pct, 2),
        },
        fix=f"Find what rank {late} does more of before each collective: a larger input shard or slower "
        "loader, extra work on that rank (logging, saving checkpoints, evaluation), throttling or a slower "
        "GPU on its node.",
        fix_snippet="nvidia-smi -q -d PERFORMANCE   # on the straggler's node",
        gain=_straggler_gain(ev, step_s, gap_s, consistent),
        source=ev.source,
    )


def _straggler_gain(
    ev: Evidence, step_s: float, gap_s: float, per_step: tuple[float, float, list[float], list[float]] | None
) -> Gain:
    """The others wait for the late rank: when it stops being late each step loses that wait. Low end: step
    i becomes step_i - gap_i (the late rank's own wait stays: the collective as it costs now), at the
    upper quartile of those remaining steps. High end: the others' whole wait goes (step_i less what they
    wait), at the median: the late rank's wait is not the balanced collective's cost but includes waking
    peers that slept through the straggler's delay (measured, ddp_like rank 1 +30 ms, gloo, 2 cores: the
    late rank waited 4-9 ms a step, the balanced run's whole step was 3.5 ms quiet, 8.2 ms at load 4; the
    steps less the others' wait 3.0 ms). One figure from the mean waits without the per-step series.
    When the wait is most of the step, what remains is small, a few ms move the gain a lot, and the note
    says the range cannot be narrow."""
    gaps = per_step[2] if per_step is not None else []
    waits = per_step[3] if per_step is not None else []
    # the ranks' merged evidence may carry no per-step times: each step then reads as the mean step
    times = ev.steps.step_times_s or [step_s] * len(gaps)
    n = min(len(times), len(gaps))
    if n >= T.MIN_STEPS_FOR_STATISTICS:
        median_s = statistics.median(times[:n])
        floor_s = median_s * (1 - T.MAX_REMOVABLE_STEP_PCT / 100.0)
        remaining = [max(times[i] - max(gaps[i], 0.0), floor_s) for i in range(n)]
        bare = [max(times[i] - max(waits[i], 0.0), floor_s) for i in range(n)]
        q1, _, q3 = statistics.quantiles(remaining, n=4)
        low, high = median_s / (q3 * _shared_cores_stretch(ev)), median_s / min(q1, statistics.median(bare))
        spread = (
            f"; what remains per step once the gap goes ({q1 * 1000:.3g}-{q3 * 1000:.3g} ms, middle half) "
            f"and once all their wait goes ({statistics.median(bare) * 1000:.3g} ms, median): the range"
        )
    else:
        median_s = step_s
        low = high = median_s / max(median_s - gap_s, median_s * (1 - T.MAX_REMOVABLE_STEP_PCT / 100.0))
        spread = "; one mean wait (no per-step series): a point estimate"
    wide = (
        " - the wait is most of the step, so what remains is small and the range cannot be narrow"
        if high / low > T.GAIN_NARROW_X
        else ""
    )
    return Gain(
        "throughput_x",
        round(low, 3),
        round(high, 3),
        f"the others stop waiting for it: the median step ({median_s * 1000:.3g} ms) loses their wait "
        f"({gap_s * 1000:.3g} ms){spread}{wide}",
    )


def _shared_cores_stretch(ev: Evidence) -> float:
    """How much slower the others' own work runs once the late rank computes beside them, for CPU ranks
    sharing a busy machine (1.0 on a GPU, on a quiet machine, or unmeasured). While the late rank was
    late the other ranks computed with one competitor fewer: with N other busy cores (other processes'
    CPU) and R ranks on C cores, each ran min(1, C / (N + R - 1)) of a core and runs min(1, C / (N + R))
    after the fix. Measured on ddp_like (gloo, 2 ranks, 2 cores) at load ~9: removing the 30 ms delay
    gave 2.6x where the step less the gap gave 3.5x; the stretch (other processes 95 %) is 1.34."""
    cores, others_pct = ev.context.cpu_count, ev.context.other_cpu_pct
    ranks = len(ev.comm.rank_step_time_s)
    if on_gpu(ev) or not cores or others_pct is None or ranks < 2:
        return 1.0
    busy = cores * min(max(others_pct, 0.0), 100.0) / 100.0
    # at the low end other tasks hold whole cores (``OTHER_TASKS_NOISE``): the load drifts between runs
    busy = float(math.ceil(busy)) if busy >= T.OTHER_TASKS_NOISE else 0.0
    return min(1.0, cores / (busy + ranks - 1)) / min(1.0, cores / (busy + ranks))


def _iqr_pct(gaps: list[float], step_s: float) -> list[float]:
    """The per-step waits' quartiles, % of the step."""
    q1, _, q3 = statistics.quantiles(gaps, n=4)
    return [round(100.0 * q1 / step_s, 2), round(100.0 * q3 / step_s, 2)]


def _steps_late(ev: Evidence, late: int) -> tuple[float, float, list[float], list[float]] | None:
    """From per-step waits (live runs): the median per-step gap between the other ranks' wait and the
    late rank's, the share of steps in which the late rank waited less, the per-step gaps and the other
    ranks' per-step waits (median over them). None without the series."""
    series = ev.comm.rank_comm_steps_s
    if not series or set(series) != set(ev.comm.rank_comm_time_s):
        return None
    n = min(len(v) for v in series.values())
    if n < T.MIN_STEPS_FOR_STATISTICS:
        return None
    waits = [statistics.median(w[i] for r, w in series.items() if r != late) for i in range(n)]
    gaps = [waits[i] - series[late][i] for i in range(n)]
    return statistics.median(gaps), 100.0 * sum(g > 0 for g in gaps) / n, gaps, waits
