"""`analyze_traces`: files or directories in, one `TraceReport` (ranks, cross-rank, evidence, findings)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.diagnose import Evidence, Finding, diagnose
from gpuwise.errors import GpuwiseError
from gpuwise.trace.cross_rank import CrossRank, cross_rank
from gpuwise.trace.rank import RankAnalysis, analyze_file
from gpuwise.trace.to_evidence import cross_rank_evidence, rank_evidence

TRACE_SUFFIXES = (".json", ".json.gz")

# progress(file_index, path, bytes_read_of_this_file)
FileProgress = Callable[[int, Path, int], None]


@dataclass
class TraceReport:
    ranks: list[RankAnalysis]
    cross_rank: CrossRank
    evidence: list[Evidence]
    findings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": [r.to_dict() for r in self.ranks],
            "cross_rank": self.cross_rank.to_dict(),
            "evidence": [e.to_dict() for e in self.evidence],
            "findings": [f.to_dict() for f in self.findings],
        }


def is_trace_name(path: Path) -> bool:
    return path.name.lower().endswith(TRACE_SUFFIXES)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; directories contribute their ``*.json`` / ``*.json.gz`` files (sorted)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and is_trace_name(p))
            if not found:
                raise GpuwiseError(f"{path}: no .json or .json.gz trace files in this directory")
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise GpuwiseError(f"{path}: no such file or directory")
    if not out:
        raise GpuwiseError("no trace files given")
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def analyze_traces(paths: Iterable[str | Path], progress: FileProgress | None = None) -> TraceReport:
    files = expand_paths(paths)
    ranks = []
    for i, path in enumerate(files):
        callback = (lambda n, i=i, path=path: progress(i, path, n)) if progress else None
        ranks.append(analyze_file(path, callback))
    return build_report(ranks)


def build_report(ranks: list[RankAnalysis]) -> TraceReport:
    across = cross_rank(ranks)
    evidence = []
    for r in ranks:
        ev = rank_evidence(r)
        r.findings = [f.id for f in diagnose(ev)]
        evidence.append(ev)
    extra = cross_rank_evidence(across)
    if extra is not None:
        evidence.append(extra)
    return TraceReport(ranks, across, evidence, diagnose(evidence))
