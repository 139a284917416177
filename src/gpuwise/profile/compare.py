"""Compare two runs: speed, phase by phase, loader settings, and which findings came or went."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.phases import PHASES


@dataclass
class RunComparison:
    a: ProfileRun
    b: ProfileRun
    speedup_x: float | None
    phases: dict[str, dict[str, float | None]]
    settings_changed: dict[str, dict[str, Any]]
    resolved: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    persisting: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def brief(run: ProfileRun) -> dict[str, Any]:
            d = run.document
            return {
                "run_id": run.run_id,
                "label": d.get("label"),
                "status": d.get("status"),
                "device": d.get("device"),
                "measured_steps": d.get("measured_steps"),
                "step_time_s": d.get("step_time_s"),
                "steps_per_s": d.get("steps_per_s"),
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


def compare_runs(a: ProfileRun, b: ProfileRun) -> RunComparison:
    sa, sb = a.document.get("steps_per_s"), b.document.get("steps_per_s")
    speedup = sb / sa if sa and sb else None
    phases = {}
    for name in PHASES:
        pa = (a.phases.get(name) or {}).get("s_per_step")
        pb = (b.phases.get(name) or {}).get("s_per_step")
        phases[name] = {
            "a_s_per_step": pa,
            "b_s_per_step": pb,
            "delta_s": (pb - pa) if pa is not None and pb is not None else None,
        }
    settings: dict[str, dict[str, Any]] = {}
    for section in ("loader", "model"):
        da, db = a.document.get(section) or {}, b.document.get(section) or {}
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
