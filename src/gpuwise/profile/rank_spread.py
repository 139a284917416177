"""The ranks of one torchrun job, joined: whose step is longest, and who waits least for the others.

Each rank's record carries its own step time and the time it waited in collectives
(``collectives.py``); ``fill_comm_evidence`` puts them in that rank's Evidence and
``cross_rank_evidence`` joins every rank's into one Evidence for the ``straggler`` rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuwise.diagnose import Evidence
from gpuwise.diagnose.evidence import Communication, RunContext

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.profile.analysis import ProfileRun

COMM_NOTE = (
    "rank_comm_time_s: host time per step waiting in collectives (DDP's gradient all-reduce at the end "
    "of backward, torch.distributed calls); the rank that waits least is the one the others wait for"
)


def fill_comm_evidence(ev: Evidence, steps: list[dict[str, Any]]) -> None:
    """A rank's own entries of ``rank_step_time_s``, ``rank_comm_time_s`` and ``rank_comm_steps_s``
    from its measured steps (``comm_wait_s`` is there when collective waits were timed)."""
    if ev.rank is None or not steps or not ev.steps.step_time_s or "comm_wait_s" not in steps[0]:
        return
    waits = [float(s.get("comm_wait_s", 0.0)) for s in steps]
    ev.comm.rank_comm_steps_s = {ev.rank: waits}
    ev.comm.rank_comm_time_s = {ev.rank: sum(waits) / len(waits)}
    ev.comm.rank_step_time_s = {ev.rank: ev.steps.step_time_s}
    ev.notes.append(COMM_NOTE)


def cross_rank_evidence(runs: list[ProfileRun]) -> Evidence | None:
    """One Evidence with every rank's step time and collective wait; None with fewer than 2 ranks."""
    steps: dict[int, float] = {}
    comm: dict[int, float] = {}
    series: dict[int, list[float]] = {}
    for run in runs:
        ev = run.evidence
        if ev.rank is None or not ev.steps.step_time_s or ev.rank in steps:
            continue  # a second record of one rank (a restarted worker) does not stand for it
        steps[ev.rank] = ev.steps.step_time_s
        if ev.rank in ev.comm.rank_comm_time_s:
            comm[ev.rank] = ev.comm.rank_comm_time_s[ev.rank]
        if ev.comm.rank_comm_steps_s and ev.rank in ev.comm.rank_comm_steps_s:
            series[ev.rank] = ev.comm.rank_comm_steps_s[ev.rank]
    if len(steps) < 2:
        return None
    notes = ["cross-rank: mean step time per rank"]
    if comm and set(comm) != set(steps):
        # the rank without a figure could be the one the others wait for: compare none
        missing = sorted(set(steps) - set(comm))
        notes.append(f"collective wait not measured on rank(s) {missing}: not compared across ranks")
        comm, series = {}, {}
    elif comm:
        notes.append(COMM_NOTE)
    ranked = [r.evidence for r in runs if r.evidence.rank in steps]
    other_cpu, steal = _machine_load(ranked)
    devices = {ev.device for ev in ranked}
    return Evidence(
        source="profile",
        label="all ranks",
        # the ranks' device when they share one: a CPU job's rules (the straggler's shared cores) need it
        device=devices.pop() if len(devices) == 1 else "",
        context=RunContext(
            other_cpu_pct=other_cpu,
            cpu_steal_pct=steal,
            cpu_count=_shared_cpu_count(ranked),
            workload_kind=next((r.evidence.kind for r in runs if r.evidence.rank in steps), "unknown"),
        ),
        comm=Communication(
            rank_step_time_s=steps,
            rank_comm_time_s=comm,
            rank_comm_steps_s=(_aligned(series) or None) if series and set(series) == set(comm) else None,
        ),
        notes=notes,
    )


def _aligned(series: dict[int, list[float]]) -> dict[int, list[float]]:
    """Step i of every rank is the same synchronous step; a rank that stopped early bounds the rest."""
    n = min((len(v) for v in series.values()), default=0)
    return {rank: waits[:n] for rank, waits in series.items()} if n else {}


def _shared_cpu_count(ranks: list[Evidence]) -> int | None:
    """The ranks' machine's cores when every rank read the same count (one machine, as under
    ``torchrun --standalone``); None when a rank has none or they differ (ranks on several hosts, whose
    machine loads do not add up). The straggler's shared-cores stretch needs it: without it the rule took
    every CPU run for a quiet one."""
    counts = {ev.context.cpu_count for ev in ranks}
    return counts.pop() if len(counts) == 1 and None not in counts else None


def _machine_load(ranks: list[Evidence]) -> tuple[float | None, float | None]:
    """Other processes' share of the machine's CPU, the ranks' own excluded (each rank's record counts
    its sibling ranks as "other"), and the largest steal time: the straggler rule's "machine busy"."""
    others = [ev.context.other_cpu_pct for ev in ranks if ev.context.other_cpu_pct is not None]
    owns = [ev.context.cpu_util_pct for ev in ranks if ev.context.cpu_util_pct is not None]
    other = None
    if ranks and len(others) == len(owns) == len(ranks):
        machine = (sum(others) + sum(owns)) / len(ranks)  # each rank's whole-machine reading, averaged
        other = max(0.0, machine - sum(owns))
    steals = [ev.context.cpu_steal_pct for ev in ranks if ev.context.cpu_steal_pct is not None]
    return other, max(steals) if steals else None


__all__ = ["cross_rank_evidence", "fill_comm_evidence"]
