"""What a tune session found: every trial, each configuration's repeats, the winner and its gain."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuwise.tune.simulated import SimulatedBatch, largest_kept
from gpuwise.tune.trial import Trial

Metric = Literal["samples_per_s", "steps_per_s"]
Verdict = Literal["baseline", "faster", "no_gain", "slower", "rejected", "failed", "near_memory_limit"]


@dataclass
class Config:
    """One configuration (knobs + the script's flags) and the trials that measured it."""

    key: str
    label: str
    trials: list[Trial]
    verdict: Verdict = "no_gain"
    why: str = ""

    def values(self, metric: Metric) -> list[float]:
        """The metric of this configuration's successful trials (status ok, non-zero value), in run order."""
        out = []
        for t in self.trials:
            value = getattr(t, metric)
            if t.status == "ok" and value:
                out.append(float(value))
        return out

    def median(self, metric: Metric) -> float | None:
        """Median of :meth:`values`; None when no trial succeeded."""
        values = self.values(metric)
        return statistics.median(values) if values else None

    def spread(self, metric: Metric) -> tuple[float, float] | None:
        """``(slowest, fastest)`` of :meth:`values`; None when no trial succeeded."""
        values = self.values(metric)
        return (min(values), max(values)) if values else None

    def to_dict(self, metric: Metric, baseline: float | None) -> dict[str, Any]:
        """The configuration as JSON, its median/min/max in the metric's unit; ``speedup_x`` is the median
        over ``baseline`` (None when either is missing).
        """
        first = self.trials[0].spec
        median = self.median(metric)
        spread = self.spread(metric)
        return {
            "label": self.label,
            "verdict": self.verdict,
            "why": self.why,
            "knobs": first.knobs,
            "params": first.params,
            "batch_size": first.batch,
            "grad_accum": first.accum,
            "trials": [t.spec.index for t in self.trials],
            f"{metric}_median": median,
            f"{metric}_min": spread[0] if spread else None,
            f"{metric}_max": spread[1] if spread else None,
            "speedup_x": median / baseline if median and baseline else None,
        }


@dataclass
class Winner:
    """The configuration the session recommends and how to apply it.

    ``speedup_x`` is its median over the baseline's; ``beats_spread`` is True when both were repeated and
    the winner's slowest repeat beat the baseline's fastest (a gain larger than the run-to-run noise).
    """

    config: Config
    speedup_x: float
    beats_spread: bool
    framework: str | None
    code: str  # the settings in the framework's own terms
    command: str  # the exact command line (the script's own flags)


@dataclass
class TuneResult:
    """Everything a tune session measured and decided; ``to_dict`` is the ``gpuwise tune --json`` schema.

    ``metric`` is samples/s when every successful trial's samples per step are known, else steps/s.
    ``tuner_wall_s`` is the whole session's wall time in seconds; ``store``/``tune_id`` are set once the
    result is saved. ``winner`` is None when no candidate beat the baseline.
    """

    command: str
    device: str | None
    framework: str | None
    metric: Metric
    trials: list[Trial]
    configs: list[Config]  # ranked, baseline included
    baseline: Config | None
    winner: Winner | None
    effective_batch: int | None
    interrupted: bool
    tuner_wall_s: float
    loss_rtol: float
    loss_steps: int
    group_id: str
    notes: list[str] = field(default_factory=list)
    store: str | None = None
    tune_id: int | None = None
    signal: int | None = None  # the signal that interrupted the session (SIGINT, SIGTERM)
    target_gpu: str | None = None
    simulated: list[SimulatedBatch] = field(default_factory=list)

    @property
    def largest_batch(self) -> int | None:
        """The largest batch a trial ran and kept (not near the memory limit): measured, not simulated."""
        ran = [
            t.spec.batch
            for t in self.trials
            if t.spec.role in ("batch", "combined", "baseline", "repeat")
            and t.spec.batch is not None
            and t.status == "ok"
            and not any(n.startswith("near the memory limit") for n in t.notes)
        ]
        return max(ran) if ran else None

    @property
    def baseline_value(self) -> float | None:
        """The baseline's median in ``metric`` units; None without a successful baseline."""
        return self.baseline.median(self.metric) if self.baseline else None

    @property
    def best_trial_wall_s(self) -> float | None:
        """Median wall time (s) of the winner's trials, including start-up; None without a winner."""
        if self.winner is None:
            return None
        walls = [t.wall_s for t in self.winner.config.trials]
        return statistics.median(walls) if walls else None

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON (the ``gpuwise tune --json`` schema and what the run store keeps)."""
        base = self.baseline_value
        w = self.winner
        return {
            "command": self.command,
            "device": self.device,
            "framework": self.framework,
            "metric": self.metric,
            "interrupted": self.interrupted,
            "group_id": self.group_id,
            "store": self.store,
            "tune_id": self.tune_id,
            "effective_batch": self.effective_batch,
            "loss_rtol": self.loss_rtol,
            "loss_steps": self.loss_steps,
            "tuner_wall_s": round(self.tuner_wall_s, 3),
            f"baseline_{self.metric}": base,
            "winner": None
            if w is None
            else {
                "label": w.config.label,
                "speedup_x": w.speedup_x,
                "beats_spread": w.beats_spread,
                "framework": w.framework,
                "code": w.code,
                "command": w.command,
                "knobs": w.config.trials[0].spec.knobs,
                "params": w.config.trials[0].spec.params,
            },
            "largest_batch": self.largest_batch,
            "target_gpu": self.target_gpu,
            "simulated_batches": [r.to_dict() for r in self.simulated],
            "simulated_max_batch": largest_kept(self.simulated),
            "configs": [c.to_dict(self.metric, base) for c in self.configs],
            "trials": [t.to_dict() for t in self.trials],
            "notes": self.notes,
        }


__all__ = ["Config", "Metric", "TuneResult", "Verdict", "Winner"]
