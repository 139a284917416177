"""`analyze_traces`: files or directories in, one `TraceReport` (ranks, cross-rank, evidence, findings)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwise.diagnose import Evidence, Finding, diagnose
from gpuwise.errors import GpuwiseError
from gpuwise.trace.causes import chain_findings
from gpuwise.trace.cross_rank import CrossRank, cross_rank
from gpuwise.trace.rank import RankAnalysis, analyze_file_ranks
from gpuwise.trace.reader import special_kind
from gpuwise.trace.to_evidence import combined_kind, cross_rank_evidence, rank_evidence

__all__ = [
    "TRACE_SUFFIXES",
    "FileProgress",
    "SkippedFile",
    "TraceReport",
    "analyze_traces",
    "build_report",
    "expand_paths",
    "is_trace_name",
    "natural_key",
]

TRACE_SUFFIXES = (".json", ".json.gz")

# progress(file_index, path, bytes_read_of_this_file)
FileProgress = Callable[[int, Path, int], None]


@dataclass
class SkippedFile:
    """A file of a multi-file run that could not be analyzed: the others still are (unless --strict)."""

    file: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form: {file, reason}."""
        return {"file": self.file, "reason": self.reason}


@dataclass
class TraceReport:
    """Everything `gpuwise trace` reports: one analysis per readable file (sorted by rank,
    unranked last), the cross-rank comparison, one Evidence per rank (+ one cross-rank), the findings
    over all of them, and the files skipped as unreadable."""

    ranks: list[RankAnalysis]
    cross_rank: CrossRank
    evidence: list[Evidence]
    findings: list[Finding]
    skipped: list[SkippedFile] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document's body (docs/json-schema.md, kind "trace")."""
        return {
            "ranks": [r.to_dict() for r in self.ranks],
            "cross_rank": self.cross_rank.to_dict(),
            "evidence": [e.to_dict() for e in self.evidence],
            "findings": [f.to_dict() for f in self.findings],
            "skipped_files": [s.to_dict() for s in self.skipped],
        }


def is_trace_name(path: Path) -> bool:
    """Does the file name end in .json or .json.gz (any case)? Directories are searched for these."""
    return path.name.lower().endswith(TRACE_SUFFIXES)


def natural_key(path: Path) -> list[Any]:
    """rank2 before rank10: digit runs compare as numbers (split() alternates text and digits)."""
    parts = re.split(r"(\d+)", str(path))
    return [int(p) if i % 2 else p.lower() for i, p in enumerate(parts)]


def _traces_under(directory: Path) -> list[Path]:
    """Every profile format at any depth, one file per run (trace/collect.py)."""
    from gpuwise.trace.collect import profiles_under

    return profiles_under(directory)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; directories contribute their trace files at any depth, in natural order."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = _traces_under(path)
            if not found:
                raise GpuwiseError(
                    f"{path}: no .json or .json.gz trace files, XPlane (.xplane.pb) or Nsight Systems "
                    "(.sqlite, .nsys-rep) profiles in this directory"
                )
            out.extend(found)
        elif path.is_file():
            out.append(path)
        elif path.exists():
            raise GpuwiseError(f"{path}: {special_kind(path)}, not a regular file: pass a trace file")
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


def _analyze_one(path: Path, callback: Callable[[int], None] | None) -> list[RankAnalysis]:
    if path.name.startswith("._"):
        raise GpuwiseError(f"{path}: a macOS metadata file (._*), not a trace")
    return analyze_file_ranks(path, callback)  # an Nsight export of several processes: one rank each


def analyze_traces(
    paths: Iterable[str | Path], progress: FileProgress | None = None, strict: bool = False
) -> TraceReport:
    """Every readable file is analyzed; an unreadable one (cut, empty, not a trace) is listed as skipped
    unless ``strict`` or it is the only file, in which case its error is the result."""
    files = expand_paths(paths)
    ranks, skipped = [], []
    for i, path in enumerate(files):
        callback = (lambda n, i=i, path=path: progress(i, path, n)) if progress else None
        try:
            ranks.extend(_analyze_one(path, callback))
        except GpuwiseError as err:
            if strict or len(files) == 1:
                raise
            reason = str(err).removeprefix(f"{path}: ")
            skipped.append(SkippedFile(str(path), reason))
    if not ranks:
        raise GpuwiseError(f"none of the {len(files)} files is a readable trace (first: {skipped[0].reason})")
    ranks.sort(key=lambda r: (r.rank.rank is None, r.rank.rank or 0))  # by rank number; unranked last
    report = build_report(ranks)
    report.skipped = skipped
    return report


def build_report(ranks: list[RankAnalysis]) -> TraceReport:
    """Cross-rank comparison, per-rank evidence and findings for analyses already made
    (each rank's `findings` is set to the ids its evidence alone triggers)."""
    across = cross_rank(ranks)
    evidence = []
    for r in ranks:
        ev = rank_evidence(r)
        r.findings = [f.id for f in diagnose(ev)]
        evidence.append(ev)
    extra = cross_rank_evidence(across, combined_kind([r.workload_kind for r in ranks]))
    if extra is not None:
        evidence.append(extra)
    return TraceReport(ranks, across, evidence, chain_findings(diagnose(evidence), evidence))
