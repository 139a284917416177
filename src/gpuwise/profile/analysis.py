"""Raw record -> ``ProfileRun``: the typed summary, Evidence and ranked findings.

Pure and torch-free: the CLI builds runs from the records its child processes wrote, the Python
API from its own recorder, and the run store re-renders saved runs, all through ``build_run``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from gpuwise.diagnose import Evidence, Finding, diagnose
from gpuwise.profile.run_evidence import build_evidence, match_catalog_gpu
from gpuwise.profile.step_stats import gpu_phase_breakdown, measured_steps, phase_breakdown
from gpuwise.profile.types import PhaseShare, RunSummary

RunStatus = Literal["completed", "error", "interrupted", "incomplete", "no_steps"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)

NO_STEPS_NOTE = (
    "NO STEPS MEASURED: the script ran torch work but no step boundary was found, so there is no step "
    "time, no phase split and no finding. A step ends at a torch.optim optimizer's step(); without "
    "one, profile the loop with gpuwise.profile(...) and call its .step() each iteration."
)


def run_status(raw: dict[str, Any]) -> RunStatus | None:
    """The record's status, except that a run which ended without a single step is ``no_steps``
    (not ``completed``): an empty profile must never read as a clean one."""
    status = raw.get("status")
    if not raw.get("steps") and status in (None, "completed", "incomplete", "running"):
        return "no_steps"
    return "incomplete" if status == "running" else status  # "running": the process never finished


@dataclass
class ProfileRun:
    """One profiled process (one rank); ``run_id`` is set once the run store has saved it."""

    summary: RunSummary
    evidence: Evidence
    findings: list[Finding] = field(default_factory=list)
    run_id: int | None = None

    @property
    def steps_per_s(self) -> float | None:
        """Measured optimizer steps per second; None when no step was measured."""
        return self.summary.steps_per_s

    @property
    def phases(self) -> dict[str, PhaseShare]:
        """Phase name → mean seconds per step and % of the step."""
        return self.summary.phases

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (docs/json-schema.md): the summary's keys between run_id and the findings."""
        return {
            "run_id": self.run_id,
            **self.summary.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "evidence": self.evidence.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileRun:
        """A run back from its JSON form (``to_dict``, the run store); a record without evidence gets an empty
        one.
        """
        evidence = (
            Evidence.from_dict(data["evidence"], "run")
            if data.get("evidence")
            else Evidence(source="profile")
        )
        findings = [Finding.from_dict(f) for f in data.get("findings", [])]
        return cls(RunSummary.from_dict(data), evidence, findings, data.get("run_id"))


def build_run(raw: dict[str, Any], command: str | None = None, exit_code: int | None = None) -> ProfileRun:
    """Summarize one raw record; ``command`` and ``exit_code`` come from the launcher, when there is one."""
    meta = raw.get("meta") or {}
    rank = meta.get("rank")
    steps, dropped, notes = measured_steps(raw)
    times = [s["wall_s"] for s in steps]
    total = sum(times)
    evidence = build_evidence(raw, steps, rank)
    memory = dict(raw.get("memory") or {})
    mem = [s.get("memory_bytes") for s in steps if s.get("memory_bytes") is not None]
    if mem:
        memory.setdefault("first_step_bytes", mem[0])
        memory.setdefault("last_step_bytes", mem[-1])
    status = run_status(raw)
    if status == "no_steps":
        notes = [NO_STEPS_NOTE, *notes]
    summary = RunSummary.from_dict(
        {
            "label": raw.get("label") or meta.get("script", ""),
            "command": command if command is not None else meta.get("command"),
            "status": status,
            "error": raw.get("error"),
            "exit_code": exit_code,
            "rank": rank,
            "world_size": meta.get("world_size"),
            "group_id": meta.get("group_id"),
            "started_at_unix_s": meta.get("started_at"),
            "device": raw.get("device"),
            "gpu_name": raw.get("gpu_name") or None,
            "warmup_steps": dropped,
            "step_boundary": raw.get("step_boundary"),
            "total_steps": len(raw.get("steps") or []),
            "measured_steps": len(steps),
            "step_time_s": total / len(times) if times else None,
            "step_time_p50_s": statistics.median(times) if times else None,
            "step_time_max_s": max(times) if times else None,
            "steps_per_s": len(times) / total if total > 0 else None,
            "wall_s": raw.get("wall_s"),
            "gpu_phases_s": gpu_phase_breakdown(steps),
            "loader": raw.get("loader"),
            "model": raw.get("model") or {},
            "memory": memory,
            "telemetry": raw.get("telemetry"),
            "step_times_s": times,
            "hook_errors": raw.get("hook_errors") or [],
            "notes": list(raw.get("notes") or []) + notes,
        }
    )
    summary = replace(summary, phases=phase_breakdown(steps))
    return ProfileRun(summary, evidence, diagnose(evidence))


__all__ = ["RUN_STATUSES", "ProfileRun", "RunStatus", "build_evidence", "build_run", "match_catalog_gpu"]
