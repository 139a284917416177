"""What every rule shares: the `Rule` signature, confidence by source, Amdahl's speed-up.

A rule is a pure, total function of one `Evidence`: it returns a `Finding` when the fields it reads
are present and past their thresholds (all in `diagnose.thresholds`), else None.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Confidence, Finding

__all__ = ["Rule", "confidence", "on_gpu", "speedup_from_saving"]

# One rule: Evidence in, a Finding (or None when it does not apply) out.
Rule = Callable[[Evidence], "Finding | None"]


def confidence(ev: Evidence) -> Confidence:
    """How sure a finding is by its source: measured (profile, trace, telemetry): high; predicted: low."""
    return "low" if ev.source == "prediction" else "high"


def speedup_from_saving(saving_pct: float) -> float:
    """Removing ``saving_pct`` % of the step time speeds the step up by this factor (Amdahl), the saving
    capped at ``MAX_REMOVABLE_STEP_PCT`` so no fix promises an infinite speed-up."""
    return 1.0 / (1.0 - min(saving_pct, T.MAX_REMOVABLE_STEP_PCT) / 100.0)


def on_gpu(ev: Evidence) -> bool:
    """A CPU-only run has no device to idle, nothing to pin; traces and predictions are GPU runs."""
    return ev.device != "cpu"
