"""A tune session in the run store: each trial that was profiled as a run (kind ``tune-trial``, its
label the trial's settings, all tied by the session's group id), and the session itself (kind
``tune``: every trial, including those that crashed before a step, and the ranking)."""

from __future__ import annotations

import dataclasses
import os

from gpuwise.profile.saved_runs import save_run
from gpuwise.store.runs import RunStore
from gpuwise.tune.result import TuneResult

__all__ = ["save_tune"]


def save_tune(result: TuneResult, store: str | os.PathLike | None, label: str = "tune") -> str:
    """Save every profiled trial (kind 'tune-trial', labelled `label #i: settings`, tied by the session's
    group id) and the session document (kind 'tune'); sets `result.tune_id`, returns the store's path."""
    with RunStore.open(store) as runs:
        for trial in result.trials:
            if trial.run is None:
                continue
            run = trial.run
            run.summary = dataclasses.replace(
                run.summary,
                label=f"{label} #{trial.spec.index}: {trial.spec.label}",
                group_id=result.group_id,
            )
            save_run(runs, run, kind="tune-trial")
        w = result.winner
        shown = w.config if w is not None else result.baseline
        result.tune_id = runs.save_document(
            "tune",
            f"{label}: {len(result.trials)} trials",
            result.to_dict(),
            command=result.command,
            status="interrupted" if result.interrupted else "completed",
            device=result.device or "",
            count=len(result.trials),
            per_s=shown.median("steps_per_s") if shown is not None else None,  # the runs list's steps/s
            top=None if w is None else f"{w.speedup_x:.2f}x: {w.config.label}"[:200],
        )
        return str(runs.path)
