"""A numerics knob's first losses against the baseline's: accepted within the stated tolerance.

The comparison is step by step on the first K losses the script passed to ``backward`` (same seed and
data order as the baseline: the knob is the only change), relative to the baseline's value. A script
that does not seed its run cannot be verified this way; the baseline's repeats show it (their losses
differ from each other), and the report says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LossCheck:
    """Whether a numerics knob's losses follow the baseline's: the worst relative difference over the first
    ``steps`` losses against the tolerance ``rtol`` (a fraction, 0.01 = 1 %), and why.
    """

    accepted: bool
    max_rel_diff: float | None
    rtol: float
    steps: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON, one key per field."""
        return dict(self.__dict__)


def compare_losses(baseline: list[float], trial: list[float], rtol: float, steps: int) -> LossCheck:
    """Compare the first ``steps`` losses of a trial with the baseline's, step by step.

    Rejected when no loss was captured, when a loss is NaN/inf, or when the largest relative difference
    exceeds ``rtol``; ``max_rel_diff`` is None when no comparison was possible.
    """
    n = min(len(baseline), len(trial), steps)
    if n == 0:
        return LossCheck(
            False, None, rtol, 0, "no losses captured to compare (the script called no backward)"
        )
    worst, at = 0.0, 0
    for i in range(n):
        if not math.isfinite(baseline[i]):
            return LossCheck(
                False, None, rtol, n, f"the baseline's loss {i + 1} is {baseline[i]}: cannot verify"
            )
        if not math.isfinite(trial[i]):
            return LossCheck(False, None, rtol, n, f"loss {i + 1} is {trial[i]} (baseline {baseline[i]:.6g})")
        diff = abs(trial[i] - baseline[i]) / max(abs(baseline[i]), 1e-12)
        if diff > worst:
            worst, at = diff, i
    if worst <= rtol:
        return LossCheck(
            True, worst, rtol, n, f"first {n} losses within {worst:.2%} of the baseline (≤ {rtol:.2%})"
        )
    return LossCheck(
        False,
        worst,
        rtol,
        n,
        f"loss {at + 1}: {trial[at]:.6g} vs baseline {baseline[at]:.6g} ({worst:.2%} > {rtol:.2%})",
    )


__all__ = ["LossCheck", "compare_losses"]
