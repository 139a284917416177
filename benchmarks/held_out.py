"""Leave-one-source-out, shared by validate_memory.py and validate_throughput.py: the headline of both
(issue 28), the guard against a model tuned to one publication.

For each publication: the |error| median and p90 on its own rows, and on every other publication's rows
without it; a publication is marked when its rows came from a held-out file (heldout_*.csv: added after
the model was frozen).
"""

from __future__ import annotations

import statistics

__all__ = ["leave_one_source_out", "percentile", "print_loso"]


def percentile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation between closest ranks (numpy's default); nan if empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def leave_one_source_out(
    abs_errors: dict[str, list[float]], held_out: set[str], digits: int = 1
) -> dict[str, dict]:
    """Per publication (key of ``abs_errors``, its rows' |error| %): own median/p90 and the rest's,
    rounded to ``digits``; the rest's are None when no other publication is left."""
    table: dict[str, dict] = {}
    for key in sorted(abs_errors):
        own = abs_errors[key]
        rest = [e for other, errs in abs_errors.items() if other != key for e in errs]
        table[key] = {
            "rows": len(own),
            "held_out": key in held_out,
            "median_abs_err_pct": round(statistics.median(own), digits),
            "p90_abs_err_pct": round(percentile(own, 0.9), digits),
            "without_median_abs_err_pct": round(statistics.median(rest), digits) if rest else None,
            "without_p90_abs_err_pct": round(percentile(rest, 0.9), digits) if rest else None,
        }
    return table


def print_loso(table: dict[str, dict]) -> None:
    """The headline table: each publication's own error and the error of the rest without it."""
    print("\nleave-one-source-out (|error| %; * = held-out publication, added after the model was frozen):")
    print(
        f"  {'source':44s} {'rows':>4s} {'own median':>10s} {'own p90':>8s} "
        f"{'rest median':>11s} {'rest p90':>8s}"
    )
    nan = float("nan")
    for key, v in table.items():
        name = ("* " if v["held_out"] else "  ") + key
        rest_median, rest_p90 = v["without_median_abs_err_pct"], v["without_p90_abs_err_pct"]
        print(
            f"  {name[:44]:44s} {v['rows']:4d} {v['median_abs_err_pct']:10.1f} {v['p90_abs_err_pct']:8.1f} "
            f"{rest_median if rest_median is not None else nan:11.1f} "
            f"{rest_p90 if rest_p90 is not None else nan:8.1f}"
        )
