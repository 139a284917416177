"""Sampled Python frames of the training thread's host gaps, as rows the host-time rules rank and name.

The profiler samples the training thread while it runs outside every hooked phase: before a forward
(``host_input``) and elsewhere (``other``). Each row of ``Evidence.host_frames`` is
``{"phase", "frame" ('file:line function'), "leaf", "pct" (of that gap's samples)}``; these helpers add
``step_pct`` (share of a typical step, %) and ``input`` (it looks like batch preparation).
"""

from __future__ import annotations

import math

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.statistics import typical_share_pct

__all__ = [
    "frames_text",
    "function_of",
    "gap_rows",
    "input_fraction",
    "input_fraction_low",
    "looks_like_input",
    "ranked",
]


def gap_rows(ev: Evidence) -> list[dict]:
    """The sampled frames of the host gaps, each with ``step_pct`` (its gap's share of a typical step
    times its share of that gap's samples) and ``input`` (it looks like batch preparation)."""
    shares = {phase: typical_share_pct(ev, phase) or 0.0 for phase in ("host_input", "other")}
    return [
        {
            **r,
            "step_pct": shares.get(r.get("phase", ""), 0.0) * r.get("pct", 0.0) / 100,
            "input": looks_like_input(r),
        }
        for r in ev.context.host_frames or []
        if r.get("phase") in shares
    ]


def input_fraction(ev: Evidence) -> float:
    """Of the host time before a forward, the sampled part that prepares batches (1 when nothing was
    sampled: the position alone says batch preparation)."""
    rows = [r for r in gap_rows(ev) if r["phase"] == "host_input"]
    sampled = sum(r["pct"] for r in rows)
    return sum(r["pct"] for r in rows if r["input"]) / sampled if sampled else 1.0


def input_fraction_low(ev: Evidence) -> float:
    """``input_fraction`` at its one-sided lower confidence bound (Wilson, ``SAMPLED_SHARE_Z``).

    The sampler takes ~20 samples a second, so a short run's gap holds a dozen: one stray sample in
    the loop that builds the arguments weighs 10 % there, and on a loaded machine (the sampler waits for
    the GIL, so it lands where Python runs rather than in a sleep) that is enough to call a step
    "waiting for data" that spends ~0 % of it preparing batches. Claims of batch preparation use this
    bound; rows without sample counts (runs saved before they were kept) fall back to the point estimate.
    """
    rows = [r for r in gap_rows(ev) if r["phase"] == "host_input"]
    n = sum(r.get("samples") or 0 for r in rows)
    if not rows or any("samples" not in r for r in rows) or n == 0:
        return input_fraction(ev)
    k = sum(r["samples"] for r in rows if r["input"])
    z = T.SAMPLED_SHARE_Z
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


def ranked(rows: list[dict], limit: int = 3) -> list[dict]:
    """Most time first, rows with a user frame before those without one; stray samples (below
    ``FRAME_MIN_STEP_PCT`` of the step) are left out after the first."""
    order = sorted(rows, key=lambda r: (not r.get("frame"), -r["step_pct"]))
    return [r for i, r in enumerate(order[:limit]) if i == 0 or r["step_pct"] >= T.FRAME_MIN_STEP_PCT]


def frames_text(rows: list[dict]) -> str:
    """The ranked rows as one summary clause: 'file:line function (~N % of the step) in leaf; ...'."""
    return "; ".join(
        f"{r['frame'] or r['leaf']} (~{r['step_pct']:.0f} % of the step)"
        + (f" in {r['leaf']}" if r["frame"] and r["leaf"] != r["frame"] else "")
        for r in rows
    )


def function_of(row: dict | None) -> str:
    """'train.py:42 get_batch' -> 'get_batch' ('' when nothing was sampled)."""
    where = (row or {}).get("frame") or (row or {}).get("leaf") or ""
    return where.rsplit(" ", 1)[-1] if " " in where else ""


def looks_like_input(row: dict | None) -> bool:
    """Batch preparation by where the time is spent, never by a function's name: the innermost frame is
    in a data library (numpy's memmap and loaders, torch's fetch/collate, datasets' arrow tables), or
    the time falls in the gap that ends in the model's forward outside the function that calls the
    model (a sleep in a ``_run_batch`` that then calls ``model(x)`` is that step's own code)."""
    row = row or {}
    leaf = (row.get("leaf") or "").lower()
    if leaf.startswith(T.INPUT_LIBRARY_FILES):
        return True
    return row.get("phase") == "host_input" and not row.get("calls_forward")
