"""Host-side rules: syncs, kernel launches, host work outside the phases, and slow outlier steps.

Shares are % of a (typical) step; step times are seconds. ``step_outliers`` tells a slow step the
script causes (a fixed period: checkpointing, evaluation) from one a busy machine causes (other
processes' CPU, steal time), and ``machine_busy`` is shared with the straggler rule for the same reason.
"""

from __future__ import annotations

import statistics
from itertools import pairwise

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Confidence, Finding, Gain
from gpuwise.diagnose.rules.common import confidence, severity_for_gain, speedup_from_saving
from gpuwise.diagnose.rules.host_frames import (
    frames_text,
    function_of,
    gap_rows,
    input_fraction,
    looks_like_input,
    ranked,
)
from gpuwise.diagnose.rules.loader_advice import batch_function_fix, overlap_gain, suggested_workers
from gpuwise.diagnose.statistics import input_share_pct, outlier_limit_s, typical_share_pct

__all__ = ["launch_bound", "machine_busy", "step_outliers", "sync_bound", "unexplained_host_time"]


def unexplained_host_time(ev: Evidence) -> Finding | None:
    """Host time outside every hooked phase that is not batch preparation before a forward: loss
    bookkeeping, logging, a batch fetched between forward and backward. Named by the training thread's
    sampled frames."""
    other = typical_share_pct(ev, "other")
    if other is None:
        return None
    # with the host time before a forward that its sampled frames show is not batch preparation
    share = other + (typical_share_pct(ev, "host_input") or 0.0) * (1.0 - input_fraction(ev))
    if share < T.OTHER_HOST_TIME_PCT:
        return None
    frames = ranked([r for r in gap_rows(ev) if r["phase"] == "other" or not r["input"]])
    input_like = bool(frames) and looks_like_input(frames[0])
    if frames:
        named = f"; most sampled: {frames_text(frames)}"
    elif ev.context.host_frames is None:
        named = "; no Python frame was sampled (telemetry was off: profile without --no-telemetry to name it)"
    else:
        named = "; no Python frame was sampled there (its gaps were shorter than the sampling interval)"
    if input_like:
        where = f" ({frames[0]['frame'] or frames[0]['leaf']})"
        fix, snippet = batch_function_fix(ev, where, function_of(frames[0]))
        fix = fix.replace("before each forward", "between the step's phases")
    else:
        fix = (
            "Look at the lines named: work that need not run every step (logging, metrics, evaluation, "
            "host copies of tensors) can run every N steps or off the training thread."
        )
        snippet = "if step % log_every == 0:\n    log(loss.item())  # not on every step"
    if input_like:
        low, high = overlap_gain(ev, share, suggested_workers(ev))
    else:  # work that can leave the step entirely (logged every N steps): Amdahl on its share
        low, high = 1.0, speedup_from_saving(share)
    return Finding(
        id="unexplained_host_time",
        title="Host work outside forward, backward and the optimizer takes much of the step",
        severity=severity_for_gain("high" if share >= T.OTHER_HOST_TIME_HIGH_PCT else "medium", high),
        confidence="medium" if frames else "low",
        category="input" if input_like else "host",
        summary=f"{share:.1f} % of each step runs on the host outside forward, backward, the optimizer and "
        f"data loading{named}.",
        metrics={
            "other_pct": round(share, 2),
            "top_frames": [r["frame"] or r["leaf"] for r in frames],
            "frame_step_pcts": [round(r["step_pct"], 1) for r in frames],
            "looks_like_input": input_like,
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "throughput_x",
            round(low, 3),
            round(high, 3),
            "bounded by the measured share of that host work"
            + ("; overlapped with the rest of the step" if input_like else "; if it leaves the step"),
        ),
        source=ev.source,
    )


def _sync_fix(ev: Evidence) -> str:
    """Keep values on the device; a training loop reads its loss every N steps."""
    if ev.kind == "training":
        return (
            "Keep values on the device and read them rarely: accumulate the loss as a tensor and call "
            ".item() every N steps."
        )
    return (
        "Keep values on the device and read them rarely: copy results to the host in batches (pinned "
        "memory, non_blocking=True), not one .item(), .cpu() or blocking copy per step."
    )


_SYNC_SNIPPET = (
    "running_loss += loss.detach()          # no sync\n"
    "if step % log_every == 0:\n"
    "    print((running_loss / log_every).item()); running_loss.zero_()"
)


def _sync_idle_finding(ev: Evidence, idle: float) -> Finding | None:
    """sync_bound from a timeline: only the GPU idle the blocking calls cause counts, and bounds the gain."""
    if idle < T.SYNC_IDLE_MODERATE_PCT:
        return None
    wait, calls = ev.activity.sync_wait_pct, ev.activity.sync_calls_per_step
    top = ev.activity.sync_idle_call
    return Finding(
        id="sync_bound",
        title="Blocking calls leave the GPU idle",
        severity="high" if idle >= T.SYNC_IDLE_HIGH_PCT else "medium",
        confidence=confidence(ev),
        category="host",
        summary=f"The GPU sits idle {idle:.1f} % of the step during and right after synchronizing or "
        "blocking calls"
        + (f" (largest: {top})" if top else "")
        + ": the device drains and waits while the host blocks, then refills the queue.",
        metrics={
            "sync_idle_pct": round(idle, 2),
            "sync_idle_call": top,
            "sync_wait_pct": None if wait is None else round(wait, 2),
            "sync_calls_per_step": calls,
        },
        fix=_sync_fix(ev),
        fix_snippet=_SYNC_SNIPPET,
        gain=Gain(
            "throughput_x",
            1.0,
            round(speedup_from_saving(idle), 3),
            "at most the GPU idle these calls cause",
        ),
        source=ev.source,
    )


def sync_bound(ev: Evidence) -> Finding | None:
    """The host blocks on the device and the GPU idles for it. On a trace, judged on the timeline: the
    GPU idle the blocking calls cause (``sync_idle_pct``) is the finding and the bound of its gain. A live
    profile has no timeline: the host's share in the calls (``sync_wait_pct``). Any kind a run can
    measure; the loss is named for training only."""
    if ev.activity.sync_idle_pct is not None:
        return _sync_idle_finding(ev, ev.activity.sync_idle_pct)
    share = ev.activity.sync_wait_pct
    if share is None or share < T.SYNC_WAIT_MODERATE_PCT:
        return None
    calls = ev.activity.sync_calls_per_step
    return Finding(
        id="sync_bound",
        title="The host blocks on the GPU every step",
        severity="high" if share >= T.SYNC_WAIT_HIGH_PCT else "medium",
        confidence=confidence(ev),
        category="host",
        summary=f"The host waits for the device {share:.1f} % of the step"
        + (
            f" in {calls:.1f} synchronizing calls per step (.item(), .cpu(), torch.cuda.synchronize)"
            if calls
            else ""
        )
        + ", so kernels cannot be queued ahead.",
        metrics={"sync_wait_pct": round(share, 2), "sync_calls_per_step": calls},
        fix=_sync_fix(ev),
        fix_snippet=_SYNC_SNIPPET,
        gain=Gain(
            "throughput_x",
            1.0,
            speedup_from_saving(share * 0.8),
            "most of the blocked time overlaps once the queue fills",
        ),
        source=ev.source,
    )


def _launch_idle(ev: Evidence) -> float | None:
    """The idle launches can explain: on a timeline the repeated short gaps between kernels (capture,
    start-up and long host gaps excluded); else the GPU's idle share less the input wait. None when kernels
    already replay from graphs (launching is not what a graph would save)."""
    a = ev.activity
    if a.graph_replay_pct is not None and a.graph_replay_pct >= T.GRAPH_REPLAY_PCT:
        return None
    if a.launch_idle_pct is not None:
        return a.launch_idle_pct
    if a.gpu_idle_pct is None:
        return None
    return a.gpu_idle_pct - (input_share_pct(ev) or 0.0)  # waiting for data is the input pipeline's


def launch_bound(ev: Evidence) -> Finding | None:
    """Many tiny kernels (``tiny_kernel_pct``) with the GPU idle between them and enough launches per step
    to fill it: launch overhead, not compute, sets the pace. On a trace the idle is the repeated short gaps
    between kernels (``launch_idle_pct``): graph capture, start-up calls and kernels replayed from a graph
    do not count. The fused optimizer is named for training only; torch.compile and CUDA graphs serve any
    kind."""
    tiny, idle = ev.activity.tiny_kernel_pct, _launch_idle(ev)
    if tiny is None or idle is None or tiny < T.TINY_KERNEL_SHARE_PCT or idle < T.LAUNCH_GPU_IDLE_PCT:
        return None
    # Launch-bound means launching the step's kernels takes about as long as the step itself.
    if ev.activity.kernels_per_step and ev.steps.step_time_s:
        launch_share = (
            100.0 * ev.activity.kernels_per_step * T.LAUNCH_HOST_US_PER_KERNEL / (ev.steps.step_time_s * 1e6)
        )
        if launch_share < T.LAUNCH_STEP_SHARE_PCT:
            return None
    high = speedup_from_saving(idle * 0.7)
    gaps = "in short gaps between kernels" if ev.activity.launch_idle_pct is not None else "of the time"
    return Finding(
        id="launch_bound",
        title="Many tiny kernels: the GPU waits for the CPU to launch work",
        severity="high" if idle >= T.LAUNCH_GPU_IDLE_HIGH_PCT else "medium",
        confidence=confidence(ev),
        category="host",
        summary=(
            f"{tiny:.0f} % of kernels run under {T.TINY_KERNEL_US:.0f} µs and the GPU is idle "
            f"{idle:.0f} % {gaps}"
        )
        + (f" ({ev.activity.kernels_per_step:.0f} kernels per step)" if ev.activity.kernels_per_step else "")
        + ": launch overhead, not compute, sets the pace.",
        metrics={
            "tiny_kernel_pct": round(tiny, 2),
            "gpu_idle_pct": ev.activity.gpu_idle_pct,
            "launch_idle_pct": round(idle, 2),
            "kernels_per_step": ev.activity.kernels_per_step,
            "host_busy_pct": ev.activity.host_busy_pct,
        },
        fix=(
            "Fuse kernels and cut launches: torch.compile (mode='reduce-overhead' uses CUDA graphs), "
            + ("fused optimizers, " if ev.kind == "training" else "")
            + "a larger batch."
        ),
        fix_snippet='model = torch.compile(model, mode="reduce-overhead")'
        + ("\noptimizer = torch.optim.AdamW(params, lr=lr, fused=True)" if ev.kind == "training" else ""),
        gain=Gain(
            "throughput_x",
            round(min(1.2, high), 3),
            round(high, 3),
            "typical torch.compile gains on launch-bound models, bounded by the launch gaps",
        ),
        source=ev.source,
        tools=("torch.compile", "CUDA graphs"),
    )


def _outlier_period(indices: list[int]) -> int | None:
    """The one gap (in steps, > 1) between the major slow steps when they recur regularly, else None."""
    if len(indices) < T.OUTLIER_PERIOD_MIN_STEPS:
        return None
    gaps = {b - a for a, b in pairwise(indices)}
    period = gaps.pop() if len(gaps) == 1 else None
    return period if period and period > 1 else None  # back-to-back slow steps are a burst, not a period


def machine_busy(ev: Evidence) -> str | None:
    """Why the machine, not the script, may have slowed steps: other processes' CPU or steal time."""
    if ev.context.other_cpu_pct is not None and ev.context.other_cpu_pct >= T.MACHINE_BUSY_OTHER_CPU_PCT:
        return f"other processes used {ev.context.other_cpu_pct:.0f} % of the machine's CPU"
    if ev.context.cpu_steal_pct is not None and ev.context.cpu_steal_pct >= T.MACHINE_BUSY_STEAL_PCT:
        return f"the hypervisor took {ev.context.cpu_steal_pct:.0f} % of CPU time (steal)"
    return None


def _outlier_cause(ev: Evidence, period: int | None, busy: str | None) -> tuple[str, Confidence]:
    """(clause naming the likely cause, confidence): a fixed period is the script's own (checkpointing,
    evaluation), and a busy machine only blurs it; without a period a busy machine is the likely cause."""
    if period:
        cause = (
            f"; they recur every {period} steps (checkpointing, evaluation, logging or garbage collection?)"
        )
        return cause, "medium" if busy else confidence(ev)
    if busy:
        return f" while {busy}: the machine was busy, so these stalls are likely not the script's", "low"
    cause = " at no fixed period (garbage collection, a slow file system or another process?)"
    return cause, "low" if ev.source == "prediction" else "medium"


def _outlier_fix(machine_only: bool, training: bool) -> tuple[str, str]:
    """(fix, snippet): re-measure when only the machine explains the stalls, else fix the script's (saving
    checkpoints and evaluating are named for training only)."""
    if machine_only:
        return (
            "Re-measure on a quiet machine (or with the job's cores reserved) before changing the script.",
            "",
        )
    if not training:
        return (
            "Find what runs on those steps: move periodic work (logging, writing results) off the critical "
            "path, avoid periodic host syncs, and call gc.freeze() after setup.",
            "import gc; gc.freeze()  # after model and data setup",
        )
    fix = "Find what runs on those steps: move checkpoint saving/evaluation off the critical path " + (
        "(async checkpointing), avoid periodic host syncs, and call gc.freeze() after setup."
    )
    snippet = (
        "import gc; gc.freeze()  # after model and data setup\n# "
        "torch.distributed.checkpoint.async_save(...) for checkpoints"
    )
    return fix, snippet


def step_outliers(ev: Evidence) -> Finding | None:
    """Steps slower than the typical one by ``OUTLIER_SIGMA`` robust σ that cost at least
    ``OUTLIER_MIN_COST_PCT`` of the run (reads ``step_times_s``, and the machine's load to say whose).
    Any kind a run measures; checkpoint saving is named as a cause for training only."""
    times = ev.steps.step_times_s
    if len(times) < T.MIN_STEPS_FOR_STATISTICS:
        return None
    median = statistics.median(times)
    limit = outlier_limit_s(times)
    outliers = [i for i, t in enumerate(times) if t > limit]
    if not outliers:
        return None
    excess = sum(times[i] - median for i in outliers)
    cost_pct = 100.0 * excess / sum(times)
    if cost_pct < T.OUTLIER_MIN_COST_PCT:
        return None
    largest = max(times[i] - median for i in outliers)
    period = _outlier_period([i for i in outliers if times[i] - median >= T.OUTLIER_MAJOR_FRACTION * largest])
    busy = machine_busy(ev)
    head = (
        f"{len(outliers)} of {len(times)} steps exceed the typical {median * 1000:.1f} ms by more than "
        f"{T.OUTLIER_SIGMA:.0f}σ (slowest {max(times) * 1000:.1f} ms), costing {cost_pct:.1f} % of the run"
    )
    cause, how_sure = _outlier_cause(ev, period, busy)
    machine_only = busy is not None and not period
    fix, snippet = _outlier_fix(machine_only, ev.kind == "training")
    return Finding(
        id="step_outliers",
        title="Some steps are much slower than the rest"
        + (" (the machine was busy)" if machine_only else ""),
        severity="low" if machine_only or cost_pct < T.OUTLIER_MODERATE_COST_PCT else "medium",
        confidence=how_sure,
        category="host",
        summary=head + cause + ("." if not busy or machine_only else f"; {busy}."),
        metrics={
            "outlier_steps": outliers[:50],
            "typical_step_s": round(median, 6),
            "slowest_step_s": round(max(times), 6),
            "outlier_cost_pct": round(cost_pct, 2),
            "period_steps": period,
            "machine_busy": busy,
            "other_cpu_pct": ev.context.other_cpu_pct,
            "cpu_steal_pct": ev.context.cpu_steal_pct,
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "step_time_pct", round(cost_pct * 0.5, 2), round(cost_pct, 2), "the excess time of the slow steps"
        ),
        source=ev.source,
    )
