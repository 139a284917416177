"""Statistics over a run's recorded steps: which steps count, and where their time went."""

from __future__ import annotations

from typing import Any

from gpuwise.profile.phases import PHASES
from gpuwise.profile.types import PhaseShare


def measured_steps(raw: dict[str, Any]) -> tuple[list[dict[str, Any]], int, list[str]]:
    """The steps after warm-up, how many warm-up steps were dropped, and notes on what was done."""
    steps = raw.get("steps") or []
    warmup = int(raw.get("warmup") or 0)
    notes = []
    if len(steps) > warmup:
        measured, dropped = steps[warmup:], warmup
    elif steps:
        dropped = min(1, len(steps) - 1)
        measured = steps[dropped:]
        notes.append(
            f"only {len(steps)} steps ran (fewer than the {warmup} warm-up steps): warm-up steps are included"
        )
    else:
        measured, dropped = [], 0
    requested = raw.get("steps_requested")
    if requested:
        measured = measured[:requested]
        if steps and len(measured) < requested:
            notes.append(
                f"the run ended after {len(measured)} measured steps, fewer than the {requested} requested"
            )
    return measured, dropped, notes


def phase_breakdown(steps: list[dict[str, Any]]) -> dict[str, PhaseShare]:
    """Mean seconds per step and share of the step for each phase."""
    if not steps:
        return {}
    total = sum(s["wall_s"] for s in steps)
    out = {}
    for phase in PHASES:
        seconds = sum(s["phase_s"].get(phase, 0.0) for s in steps)
        out[phase] = PhaseShare(seconds / len(steps), 100.0 * seconds / total if total > 0 else 0.0)
    return out


def gpu_phase_breakdown(steps: list[dict[str, Any]]) -> dict[str, float] | None:
    """Mean GPU seconds per step of each phase over the steps that have CUDA-event timings; None when none has
    (CPU runs).
    """
    with_gpu = [s["gpu_phase_s"] for s in steps if s.get("gpu_phase_s")]
    if not with_gpu:
        return None
    names = sorted({k for g in with_gpu for k in g})
    return {k: sum(g.get(k, 0.0) for g in with_gpu) / len(with_gpu) for k in names}


__all__ = ["gpu_phase_breakdown", "measured_steps", "phase_breakdown"]
