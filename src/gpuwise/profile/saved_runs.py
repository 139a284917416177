"""A `ProfileRun` in the run store and back: the row's columns from the run's summary, the document from
`ProfileRun.to_dict`. The store itself (`gpuwise.store.runs`) knows rows and JSON only."""

from __future__ import annotations

from gpuwise.profile.analysis import ProfileRun
from gpuwise.store.runs import RunColumns, RunStore

__all__ = ["load_run", "save_run"]


def save_run(runs: RunStore, run: ProfileRun, kind: str = "profile") -> int:
    """Store a ProfileRun (kind 'profile', or 'tune-trial' for the tuner's trials); returns its id, also
    set on the run as `run_id`."""
    doc = run.to_dict()
    doc.pop("run_id", None)
    s = run.summary
    columns = RunColumns(
        label=s.label,
        command=s.command or "",
        status=s.status or "",
        device=s.device or "",
        gpu=s.gpu_name or "",
        measured_steps=s.measured_steps,
        steps_per_s=s.steps_per_s,
        top_finding=run.findings[0].id if run.findings else None,
        group_id=s.group_id,
        rank=s.rank,
        exit_code=s.exit_code,
        step_time_s=s.step_time_s,
    )
    run.run_id = runs.save_row(kind, columns, doc)
    return run.run_id


def load_run(runs: RunStore, ref: str | int) -> ProfileRun:
    """The profiled run `ref` names (an id, 'last', or -N for the N-th newest), with its `run_id` set."""
    run_id, data = runs.load_run_document(ref)
    run = ProfileRun.from_dict(data)
    run.run_id = run_id
    return run
