"""A numerics knob's losses against the baseline's, over a window after warm-up.

Both runs capture the losses the script passed to ``backward`` for the whole trial (warm-up and measured
steps; same seed and data order as the baseline: the knob is the only change). Every captured loss must
be finite (an fp16 overflow anywhere rejects the knob); then the window, the last ``window`` losses after
the first ``warmup`` (the measured part of the trial, where a fresh initialisation's first steps no longer
dominate and a drift or an overflow that builds up has had time to show), is compared by its mean and its
spread: the knob is accepted when the window's mean is within ``rtol`` of the baseline's (relative) and its
spread (standard deviation) is at most twice the baseline's plus ``rtol`` of the mean (a run that starts
to oscillate or diverge inside the window). A script that does not seed its run cannot be verified this
way; the baseline's repeats show it (their windows differ from each other), and the report says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LossCheck:
    """Whether a numerics knob's losses follow the baseline's over the window (losses ``first_step`` to
    ``first_step + steps - 1``, 1-based): the relative difference of the window means against the tolerance
    ``rtol`` (a fraction, 0.01 = 1 %), both windows' means and spreads, and why.
    """

    accepted: bool
    max_rel_diff: float | None  # |mean − baseline mean| / |baseline mean| over the window
    rtol: float
    steps: int  # losses in the window
    reason: str
    first_step: int = 1  # the window's first loss (1-based)
    mean: float | None = None
    baseline_mean: float | None = None
    spread: float | None = None  # standard deviation over the window
    baseline_spread: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON, one key per field."""
        return dict(self.__dict__)


def _nonfinite(losses: list[float], n: int) -> int | None:
    return next((i for i in range(n) if not math.isfinite(losses[i])), None)


def compare_losses(
    baseline: list[float], trial: list[float], rtol: float, window: int, warmup: int = 0
) -> LossCheck:
    """Compare a trial's losses with the baseline's over the last ``window`` losses after ``warmup``.

    Rejected when no loss was captured, when any loss is NaN/inf, or when the window's mean or spread
    leaves the tolerance; ``max_rel_diff`` is None when no comparison was possible. With no loss after
    the warm-up (a run shorter than its warm-up) the window is the last ``window`` losses captured.
    """
    n = min(len(baseline), len(trial))
    if n == 0:
        return LossCheck(
            False, None, rtol, 0, "no losses captured to compare (the script called no backward)"
        )
    if (i := _nonfinite(baseline, n)) is not None:
        return LossCheck(False, None, rtol, n, f"the baseline's loss {i + 1} is {baseline[i]}: cannot verify")
    if (i := _nonfinite(trial, n)) is not None:
        return LossCheck(False, None, rtol, n, f"loss {i + 1} is {trial[i]} (baseline {baseline[i]:.6g})")
    start = max(warmup, n - window) if n > warmup else max(0, n - window)
    base_w, trial_w = baseline[start:n], trial[start:n]
    mb, mt = statistics.fmean(base_w), statistics.fmean(trial_w)
    sb = statistics.pstdev(base_w) if len(base_w) > 1 else 0.0
    st = statistics.pstdev(trial_w) if len(trial_w) > 1 else 0.0
    rel = abs(mt - mb) / max(abs(mb), 1e-12)
    span = f"losses {start + 1}-{n}" + (f", after {warmup} warm-up" if start >= warmup > 0 else "")

    def check(accepted: bool, reason: str) -> LossCheck:
        return LossCheck(accepted, rel, rtol, n - start, reason, start + 1, mt, mb, st, sb)

    spread_limit = 2 * sb + rtol * abs(mb)
    if rel > rtol:
        return check(False, f"{span}: mean {mt:.6g} vs baseline {mb:.6g} ({rel:.2%} > {rtol:.2%})")
    if st > spread_limit:
        return check(
            False,
            f"{span}: spread {st:.4g} vs baseline {sb:.4g} (> {spread_limit:.4g}: oscillating or diverging)",
        )
    return check(
        True,
        f"post-warm-up losses within {rel:.2%} of the baseline's (≤ {rtol:.2%}; {span}: mean {mt:.6g} vs "
        f"{mb:.6g}, spread {st:.3g} vs {sb:.3g})",
    )


__all__ = ["LossCheck", "compare_losses"]
