"""Compare two runs: speed, phase by phase, loader settings, and which findings came or went."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.phases import PHASES
from gpuwise.profile.types import LoaderInfo


@dataclass
class RunComparison:
    """Run ``b`` against run ``a``: the speed-up (b's steps/s over a's; None when either is missing), each
    phase's seconds per step in both and the difference, the loader and model settings that differ, and the
    finding ids resolved, new and persisting.
    """

    a: ProfileRun
    b: ProfileRun
    speedup_x: float | None
    phases: dict[str, dict[str, float | None]]
    settings_changed: dict[str, dict[str, Any]]
    resolved: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    persisting: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON (``gpuwise compare --json``), each run in brief."""

        def brief(run: ProfileRun) -> dict[str, Any]:
            s = run.summary
            return {
                "run_id": run.run_id,
                "label": s.label,
                "status": s.status,
                "device": s.device,
                "measured_steps": s.measured_steps,
                "step_time_s": s.step_time_s,
                "steps_per_s": s.steps_per_s,
            }

        return {
            "a": brief(self.a),
            "b": brief(self.b),
            "speedup_x": self.speedup_x,
            "phases": self.phases,
            "settings_changed": self.settings_changed,
            "findings_resolved": self.resolved,
            "findings_new": self.new,
            "findings_persisting": self.persisting,
        }


def _as_dict(loader: LoaderInfo | None) -> dict[str, Any]:
    return loader.to_dict() if loader is not None else {}


def compare_runs(a: ProfileRun, b: ProfileRun) -> RunComparison:
    """Compare two runs (``a`` the before, ``b`` the after); batch counts, the loader's CPU share and the
    parameter count are not counted as settings.
    """
    sa, sb = a.summary.steps_per_s, b.summary.steps_per_s
    speedup = sb / sa if sa and sb else None
    phases = {}
    for name in PHASES:
        share_a, share_b = a.phases.get(name), b.phases.get(name)
        pa = share_a.s_per_step if share_a else None
        pb = share_b.s_per_step if share_b else None
        phases[name] = {
            "a_s_per_step": pa,
            "b_s_per_step": pb,
            "delta_s": (pb - pa) if pa is not None and pb is not None else None,
        }
    settings: dict[str, dict[str, Any]] = {}
    for section, da, db in (
        ("loader", _as_dict(a.summary.loader), _as_dict(b.summary.loader)),
        ("model", a.summary.model.to_dict(), b.summary.model.to_dict()),
    ):
        for key in sorted(set(da) | set(db)):
            if key in {"batches", "main_thread_cpu_share_pct", "num_params"}:
                continue
            if da.get(key) != db.get(key):
                settings[f"{section}.{key}"] = {"a": da.get(key), "b": db.get(key)}
    ids_a = [f.id for f in a.findings]
    ids_b = [f.id for f in b.findings]
    return RunComparison(
        a,
        b,
        speedup,
        phases,
        settings,
        resolved=[i for i in ids_a if i not in ids_b],
        new=[i for i in ids_b if i not in ids_a],
        persisting=[i for i in ids_a if i in ids_b],
    )


__all__ = ["RunComparison", "compare_runs"]
