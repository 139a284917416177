"""Across ranks: who is slow, who waits, and which ranks are duplicated or missing.

Ranks come from each file's ``distributedInfo.rank`` (or ``rank-N`` in its name). Two files
claiming one rank are both analyzed and reported; only the first enters the cross-rank
comparison, and a note says so. HTA, by contrast, keeps the last and drops the other silently.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gpuwise.trace.rank import RankAnalysis

__all__ = ["CrossRank", "compact_ranges", "cross_rank"]


@dataclass
class CrossRank:
    """What differs across the ranks of one run: step time per rank (s) and the slowest's skew
    over the median (%), communication ms per step and its spread (%), idle % per rank, and the
    ranks that are duplicated, missing or unknown."""

    ranks: list[int]  # ranks compared (first file of each)
    world_size: int | None
    duplicates: dict[int, list[str]]  # rank -> every file that claims it
    missing: list[int]  # ranks of world_size absent from the input
    unranked: list[str]  # files with no rank (compared by nothing)
    rank_step_time_s: dict[int, float]
    step_skew_pct: float | None  # (slowest - median) / median
    slowest_rank: int | None
    fastest_rank: int | None
    comm_ms_per_step: dict[int, float]
    comm_skew_pct: float | None  # (most - least communication time) / most
    least_comm_rank: int | None  # waits least at collectives: usually the straggler the others wait for
    idle_pct: dict[int, float]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: rank keys as strings, times and shares rounded."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "ranks": self.ranks,
            "world_size": self.world_size,
            "duplicates": {str(k): v for k, v in self.duplicates.items()},
            "missing_ranks": self.missing,
            "missing_count": len(self.missing),
            "unranked_files": self.unranked,
            "rank_step_time_s": {str(k): round(v, 7) for k, v in self.rank_step_time_s.items()},
            "step_skew_pct": r(self.step_skew_pct),
            "slowest_rank": self.slowest_rank,
            "fastest_rank": self.fastest_rank,
            "comm_ms_per_step": {str(k): round(v, 4) for k, v in self.comm_ms_per_step.items()},
            "comm_skew_pct": r(self.comm_skew_pct),
            "least_comm_rank": self.least_comm_rank,
            "idle_pct": {str(k): round(v, 4) for k, v in self.idle_pct.items()},
            "notes": self.notes,
        }


def compact_ranges(values: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    runs: list[list[int]] = []
    for v in sorted(values):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(f"{a}-{b}" if b != a else str(a) for a, b in runs)


def cross_rank(analyses: list[RankAnalysis]) -> CrossRank:
    """Compare the ranks of one run: step-time skew, communication spread, idle share per rank, and
    which ranks are duplicated, missing or unranked (each such case also a note)."""
    notes: list[str] = []
    by_rank, unranked = _by_rank(analyses, notes)
    duplicates = {rank: [a.file for a in group] for rank, group in by_rank.items() if len(group) > 1}
    worlds = {a.rank.world_size for a in analyses if a.rank.world_size}
    world = max(worlds) if worlds else None
    if len(worlds) > 1:
        notes.append(
            f"the files report different world sizes ({', '.join(map(str, sorted(worlds)))}): "
            "they may come from different jobs"
        )
    first = {rank: group[0] for rank, group in sorted(by_rank.items())}
    missing = sorted(set(range(world)) - set(first)) if world and len(first) > 0 else []
    if missing and len(first) > 1:
        notes.append(f"{len(missing)} of {world} ranks have no trace here (ranks {compact_ranges(missing)})")
    steps, skew, slowest, fastest = _step_skew(first)
    comm, comm_skew, least = _comm_skew(first)
    idle = {rank: a.temporal.idle_pct for rank, a in first.items() if a.temporal is not None}
    return CrossRank(
        sorted(first),
        world,
        duplicates,
        missing,
        unranked,
        steps,
        skew,
        slowest,
        fastest,
        comm,
        comm_skew,
        least,
        idle,
        notes,
    )


def _by_rank(
    analyses: list[RankAnalysis], notes: list[str]
) -> tuple[dict[int, list[RankAnalysis]], list[str]]:
    """(rank -> its files' analyses in input order, files with no rank); notes on duplicates and
    unranked files go to `notes`."""
    by_rank: dict[int, list[RankAnalysis]] = defaultdict(list)
    unranked = [a.file for a in analyses if a.rank.rank is None]
    for a in analyses:
        if a.rank.rank is not None:
            by_rank[a.rank.rank].append(a)
    for rank, group in sorted(by_rank.items()):
        if len(group) > 1:
            files = [a.file for a in group]
            notes.append(
                f"rank {rank} appears in {len(files)} files ({', '.join(files)}); all were analyzed, "
                f"the first stands for rank {rank} in the cross-rank comparison"
            )
    if unranked and len(analyses) > 1:
        notes.append(
            f"{len(unranked)} file(s) carry no rank (no distributedInfo.rank, no rank-N in the name): "
            "analyzed on their own, left out of the cross-rank comparison"
        )
    return by_rank, unranked


def _step_skew(
    first: dict[int, RankAnalysis],
) -> tuple[dict[int, float], float | None, int | None, int | None]:
    """(rank -> mean step time in s, % by which the slowest exceeds the median, slowest, fastest);
    the last three are None with fewer than two ranks having steps."""
    steps = {rank: a.steps.mean_ms / 1000 for rank, a in first.items() if a.steps.mean_ms is not None}
    if len(steps) < 2:
        return steps, None, None, None
    median = statistics.median(steps.values())
    slowest = max(steps, key=steps.__getitem__)
    fastest = min(steps, key=steps.__getitem__)
    skew = 100.0 * (steps[slowest] - median) / median if median > 0 else None
    return steps, skew, slowest, fastest


def _comm_skew(first: dict[int, RankAnalysis]) -> tuple[dict[int, float], float | None, int | None]:
    """(rank -> communication ms per step, spread (most - least) / most in %, the rank waiting least)."""
    comm = {rank: a.comm.ms_per_step for rank, a in first.items() if a.comm.ms_per_step is not None}
    if not (len(comm) >= 2 and max(comm.values()) > 0):
        return comm, None, None
    least = min(comm, key=comm.__getitem__)
    return comm, 100.0 * (max(comm.values()) - comm[least]) / max(comm.values()), least
