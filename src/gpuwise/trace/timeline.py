"""The GPU's idle time on the timeline, and what each idle gap is: the evidence the host findings rest on.

Counting synchronizing calls or tiny kernels says nothing about what they cost: a ``cudaStreamSynchronize``
while the GPU runs flat out costs nothing, and one 480 ms ``hipMemcpyWithStream`` with the GPU idle costs
the whole step. So each gap between device activity (µs, merged over all streams) inside the analysis
window is attributed to at most one cause, checked in this order:

- ``capture``: a CUDA/HIP graph capture or instantiation call overlaps it, or (in a trace that captures or
  replays graphs) ``CAPTURE_MIN_QUERIES`` capture-status queries fall in it (one-off, excluded);
- ``sync``: a synchronizing or blocking runtime call returns inside it (the device drained and waited for
  the host, which then had to refill the queue): the part of the gap the call overlaps plus up to
  ``LAUNCH_GAP_MAX_US`` after it returns is the idle the sync causes, the most a fix of it can recover
  (the rest of the gap is host work). A gap wholly inside a call is the device's own: work was queued;
- ``startup``: a gap of ``ONE_OFF_GAP_US`` or more that a runtime call of ``ONE_OFF_CALL_US`` or longer
  overlaps (the first ``cudaLaunchKernel`` loading modules, ``cudaEventCreate`` creating the context, JIT
  compilation), in the first step (warm-up) when the window is steps: one-off, excluded. A long call in
  every step is steady state;
- ``launch``: a gap shorter than ``LAUNCH_GAP_MAX_US`` (the host could not queue the next kernel in time);
  only these, repeated, make a trace launch-bound;
- ``host``: any other gap (host work between kernels, data loading, Python).

The window is the steps' host spans (``ProfilerStep#N``, the spans HTA keeps), so host time before a
step's first kernel counts as idle; with no step annotation it is the device span. Shares are % of the
window less the one-off gaps ("steady" window).

The call names below are the ones this module needs until the kernel/API taxonomy (trace.kernel_names)
carries them: capture/graph APIs from the CUDA Runtime API reference (Graph Management, Stream
Management) and the HIP Runtime API reference (the same calls with ``hip``); blocking copies from the
CUDA Runtime "API synchronization behavior" page and HIP's ``hipMemcpyWithStream`` (hip_runtime_api.h).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gpuwise.diagnose import thresholds as T
from gpuwise.trace.breakdown import merge_intervals, union_length
from gpuwise.trace.hta_selection import HtaView, unique_rows
from gpuwise.trace.kernels import KERNEL_CATS
from gpuwise.trace.steps import Steps, cpu_complete_events
from gpuwise.trace.table import EventTable
from gpuwise.trace.taxonomy import HOST_BLOCKING_ROLES, api_role

__all__ = [
    "CAPTURE_RE",
    "LAUNCH_GAP_MAX_US",
    "ONE_OFF_CALL_US",
    "GapCause",
    "Timeline",
    "blocking_call",
    "graph_launch_call",
    "timeline",
]

GapCause = Literal["capture", "sync", "startup", "launch", "host"]
Window = Literal["steps", "device"]  # the steps' host spans, or the device span when no step holds work
_CAUSES: tuple[GapCause, ...] = ("capture", "sync", "startup", "launch", "host")
_RUNTIME_CATS = ("cuda_runtime", "Runtime", "cuda_driver", "mtia_runtime", "hip_runtime")

# The gap thresholds live with every other threshold (diagnose/thresholds.py, with their sources).
LAUNCH_GAP_MAX_US = T.TIMELINE_LAUNCH_GAP_MAX_US
ONE_OFF_CALL_US = T.TIMELINE_ONE_OFF_CALL_US
ONE_OFF_GAP_US = T.TIMELINE_ONE_OFF_GAP_US
CAPTURE_MIN_QUERIES = T.TIMELINE_CAPTURE_MIN_QUERIES
# Graph capture / instantiation: CUDA Runtime API "Graph Management" and "Stream Management"; HIP the same.
CAPTURE_RE = re.compile(
    r"^(cuda|hip|cu)(Stream(Begin|End)Capture|ThreadExchangeStreamCaptureMode|"
    r"Graph(Instantiate|Upload|ExecUpdate|Add\w*Node|KernelNodeSetParams))\w*$"
)
_CAPTURE_QUERY_RE = re.compile(r"^(cuda|hip|cu)Stream(GetCaptureInfo|IsCapturing)\w*$")


def blocking_call(name: str) -> bool:
    """Does this runtime call block the host until the device is done (a sync or a blocking copy)?
    The roles come from the sourced taxonomy (trace/data/kernel_taxonomy.csv)."""
    return api_role(name) in HOST_BLOCKING_ROLES


def graph_launch_call(name: str) -> bool:
    """A CUDA/HIP graph replay (cudaGraphLaunch, hipGraphLaunch): the taxonomy's graph_launch role."""
    return api_role(name) == "graph_launch"


@dataclass
class Timeline:
    """The analysis window (µs) and its GPU idle time by cause; shares are % of the steady window (the
    window less the one-off gaps). ``causes`` names the largest one-off and sync gaps for the report."""

    window: Window
    window_us: float
    idle_us: float
    compute_us: float
    idle_by_cause_us: dict[str, float]
    gaps_by_cause: dict[str, int]
    before_first_kernel_us: float  # host time at the start of each step before its first device event
    graph_replay_pct: float | None  # kernels launched by a graph launch, % of linked kernels
    capture_calls: int
    negative_kernel_pct: float  # device events with a negative duration, % of device events
    sync_top: str | None  # the blocking call behind the largest sync gap, with the gap
    one_off: list[str] = field(default_factory=list)  # what each one-off gap was
    notes: list[str] = field(default_factory=list)

    @property
    def one_off_us(self) -> float:
        """Idle in capture and start-up gaps: reported, excluded from the steady-state shares."""
        return self.idle_by_cause_us["capture"] + self.idle_by_cause_us["startup"]

    @property
    def steady_us(self) -> float:
        """The window less its one-off gaps, µs."""
        return max(self.window_us - self.one_off_us, 0.0)

    def share_pct(self, us: float) -> float | None:
        """``us`` as % of the steady window (None when it is empty)."""
        return 100.0 * us / self.steady_us if self.steady_us > 0 else None

    @property
    def idle_pct(self) -> float | None:
        """Steady-state GPU idle, % of the steady window."""
        return self.share_pct(self.idle_us - self.one_off_us)

    @property
    def compute_pct(self) -> float | None:
        """Compute kernels' union, % of the steady window."""
        return self.share_pct(self.compute_us)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (docs/json-schema.md, ``ranks[].timeline``): µs to 1 decimal, shares to 3."""

        def r(x: float | None, n: int = 3) -> float | None:
            return None if x is None else round(x, n)

        return {
            "window": self.window,
            "window_us": r(self.window_us, 1),
            "steady_window_us": r(self.steady_us, 1),
            "idle_pct": r(self.idle_pct),
            "compute_pct": r(self.compute_pct),
            "idle_by_cause_us": {k: r(v, 1) for k, v in self.idle_by_cause_us.items()},
            "idle_by_cause_pct": {k: r(self.share_pct(v)) for k, v in self.idle_by_cause_us.items()},
            "gaps_by_cause": self.gaps_by_cause,
            "before_first_kernel_us": r(self.before_first_kernel_us, 1),
            "graph_replay_pct": r(self.graph_replay_pct),
            "capture_calls": self.capture_calls,
            "negative_kernel_pct": r(self.negative_kernel_pct),
            "sync_top": self.sync_top,
            "one_off": self.one_off,
        }


def _window(
    busy_s: np.ndarray, busy_e: np.ndarray, steps: Steps, count: int
) -> tuple[Window, np.ndarray, np.ndarray]:
    """The steps' spans (the first ``count``, as HTA keeps them) when device work falls inside them,
    else the device span."""
    if count:
        order = np.argsort(steps.start_us)[:count]
        ws, we = merge_intervals(steps.start_us[order], steps.end_us[order])
        inside = _clip_total(busy_s, busy_e, ws, we)
        if inside > 0:
            return "steps", ws, we
    return "device", busy_s[:1], busy_e[-1:]


def _clip_total(bs: np.ndarray, be: np.ndarray, ws: np.ndarray, we: np.ndarray) -> float:
    """Length of the (merged, sorted) busy intervals inside the (merged, sorted) window intervals."""
    total = 0.0
    for a, b in zip(ws.tolist(), we.tolist(), strict=True):
        lo, hi = np.searchsorted(be, a, side="right"), np.searchsorted(bs, b, side="left")
        if hi > lo:
            total += float((np.minimum(be[lo:hi], b) - np.maximum(bs[lo:hi], a)).clip(0).sum())
    return total


def _gaps(
    bs: np.ndarray, be: np.ndarray, ws: np.ndarray, we: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """(gap starts, gap ends, host time before each window's first device event) within the window."""
    gs, ge, lead = [], [], 0.0
    for a, b in zip(ws.tolist(), we.tolist(), strict=True):
        lo, hi = np.searchsorted(be, a, side="right"), np.searchsorted(bs, b, side="left")
        s, e = np.maximum(bs[lo:hi], a), np.minimum(be[lo:hi], b)
        starts = np.concatenate(([a], e))
        ends = np.concatenate((s, [b]))
        keep = ends > starts
        gs.append(starts[keep])
        ge.append(ends[keep])
        lead += float(s[0] - a) if s.size else 0.0
    if not gs:
        return np.empty(0), np.empty(0), 0.0
    return np.concatenate(gs), np.concatenate(ge), lead


class _Calls:
    """Host runtime calls of one kind, sorted by start, answering "does any overlap [a, b)?" at once."""

    def __init__(self, t: EventTable, rows: np.ndarray) -> None:
        order = np.argsort(t.ts[rows], kind="stable")
        self.rows = rows[order]
        self.start = t.ts[self.rows]
        self.end_max = np.maximum.accumulate(self.start + t.dur[self.rows]) if rows.size else self.start
        self.end_sorted = np.sort(self.start + t.dur[self.rows])
        self.max_dur = float(t.dur[self.rows].max()) if rows.size else 0.0

    def overlaps(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per gap [a, b): does a call start before b and end after a?"""
        if not self.rows.size:
            return np.zeros(a.shape, dtype=bool)
        k = np.searchsorted(self.start, b, side="left") - 1
        ok = k >= 0
        out = np.zeros(a.shape, dtype=bool)
        out[ok] = self.end_max[k[ok]] > a[ok]
        return out

    def returns_in(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per gap [a, b): does a call return inside it (a < end <= b)? The device then waited for the
        host to come back; a gap wholly inside a call is the device's own (work was queued)."""
        return np.searchsorted(self.end_sorted, b, side="right") > np.searchsorted(
            self.end_sorted, a, side="right"
        )

    def longest_in(self, t: EventTable, a: float, b: float) -> int | None:
        """The longest call overlapping [a, b), or None."""
        hit = self.rows[(self.start < b) & (self.start + t.dur[self.rows] > a)]
        return int(hit[np.argmax(t.dur[hit])]) if hit.size else None


def _runtime_rows(t: EventTable) -> np.ndarray:
    """Host runtime calls (complete, with a valid duration), in row order: what `_call_rows` selects from."""
    return np.flatnonzero(t.cat_mask(*_RUNTIME_CATS) & cpu_complete_events(t))


def _call_rows(
    t: EventTable, runtime: np.ndarray, matches: Callable[[str], object] | None, min_dur_us: float = 0.0
) -> np.ndarray:
    """The ``runtime`` calls whose name ``matches`` (any name if None) lasting ``min_dur_us`` or more."""
    rows = runtime[t.dur[runtime] >= min_dur_us]
    return t.rows_named(rows, matches) if matches is not None else rows


def _member(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Per value: is it in ``pool``? (sorted search: np.isin's first call imports more of NumPy)."""
    if not pool.size:
        return np.zeros(values.shape, dtype=bool)
    ordered = np.sort(pool)
    pos = np.minimum(np.searchsorted(ordered, values), ordered.size - 1)
    return ordered[pos] == values


def _graph_replay_pct(t: EventTable, kernel_rows: np.ndarray, graph: np.ndarray) -> float | None:
    """Kernels whose launch (by correlation id) is a graph launch (``graph``: the graph launch calls), % of
    the kernels linked to a launch."""
    corr = t.correlation[kernel_rows]
    corr = corr[corr >= 0]
    if not corr.size:
        return None
    launches = np.flatnonzero(t.cat_mask(*_RUNTIME_CATS) & (t.correlation >= 0))
    linked = _member(corr, t.correlation[launches])
    if not linked.any():
        return None
    if not graph.size:
        return 0.0
    return 100.0 * float(_member(corr[linked], t.correlation[graph]).sum()) / float(linked.sum())


def _classify(gs: np.ndarray, ge: np.ndarray, calls: dict[str, _Calls], warm_up_end: float) -> np.ndarray:
    """Per gap, the index of its cause in ``_CAUSES`` (first matching, in the module docstring's order);
    start-up gaps begin before ``warm_up_end`` (the first step's end; a long call every step is steady)."""
    length = ge - gs
    cause = np.where(length < LAUNCH_GAP_MAX_US, _CAUSES.index("launch"), _CAUSES.index("host"))
    startup = calls["startup"].overlaps(gs, ge) & (length >= ONE_OFF_GAP_US) & (gs < warm_up_end)
    cause = np.where(startup, _CAUSES.index("startup"), cause)
    cause = np.where(calls["sync"].returns_in(gs, ge), _CAUSES.index("sync"), cause)
    queries = calls["query"]
    in_gap = np.searchsorted(queries.start, ge) - np.searchsorted(queries.start, gs)
    capture = calls["capture"].overlaps(gs, ge) | (
        (in_gap >= CAPTURE_MIN_QUERIES) & (length >= LAUNCH_GAP_MAX_US)
    )
    return np.where(capture, _CAUSES.index("capture"), cause)


def _sync_part(t: EventTable, calls: _Calls, a: float, b: float) -> float:
    """The part of gap [a, b) the blocking calls that return inside it cause: the time each overlaps it,
    plus up to ``LAUNCH_GAP_MAX_US`` after it returns (the host refilling the queue); the rest is host
    work."""
    lo = np.searchsorted(calls.start, a - calls.max_dur, side="left")  # earlier calls end before a
    hi = np.searchsorted(calls.start, b, side="right")
    start = calls.start[lo:hi]
    ends = start + t.dur[calls.rows[lo:hi]]
    hit = (ends > a) & (ends <= b)
    s = np.clip(start[hit], a, b)
    e = np.clip(ends[hit] + LAUNCH_GAP_MAX_US, a, b)
    return union_length(s, e)


def _split(
    t: EventTable, gs: np.ndarray, ge: np.ndarray, cause: np.ndarray, sync: _Calls
) -> tuple[dict[str, float], str | None]:
    """(idle µs by cause, the largest sync part described): a sync gap gives the sync its part
    (`_sync_part`) and the rest to host (or launch, when short)."""
    length = ge - gs
    out: dict[str, float] = {c: float(length[cause == i].sum()) for i, c in enumerate(_CAUSES)}
    out["sync"] = 0.0
    top, top_part = None, 0.0
    for i in np.flatnonzero(cause == _CAUSES.index("sync")).tolist():
        part = min(_sync_part(t, sync, float(gs[i]), float(ge[i])), float(length[i]))
        out["sync"] += part
        rest = float(length[i]) - part
        out["launch" if rest < LAUNCH_GAP_MAX_US else "host"] += rest
        if part > top_part:
            top, top_part = i, part
    if top is None:
        return out, None
    row = sync.longest_in(t, float(gs[top]), float(ge[top]))
    name = t.name_of(int(t.name[row])) if row is not None else "a synchronizing call"
    call_ms = t.dur[row] / 1000 if row is not None else 0.0
    return out, f"{name} ({call_ms:,.1f} ms call): GPU idle {top_part / 1000:,.1f} ms"


def _describe(t: EventTable, calls: _Calls, gs: np.ndarray, ge: np.ndarray, what: str) -> str | None:
    """'<call> (<call ms> ms call, GPU idle <gap ms> ms)' for the largest gap, or None without one."""
    if not gs.size:
        return None
    i = int(np.argmax(ge - gs))
    row = calls.longest_in(t, float(gs[i]), float(ge[i]))
    call = f"{t.name_of(int(t.name[row]))} ({t.dur[row] / 1000:,.1f} ms call)" if row is not None else what
    return f"{call}: GPU idle {(ge[i] - gs[i]) / 1000:,.1f} ms"


def timeline(
    t: EventTable, view: HtaView, steps: Steps, window_steps: int, types: np.ndarray
) -> Timeline | None:
    """The window's idle time by cause (module docstring); None for a trace without device activity.
    ``types``: HTA kernel type per name code (0 = computation)."""
    rows = unique_rows(view.rows)
    rows = rows[t.stream[rows] != -1]
    if not rows.size:
        return None
    bs, be = merge_intervals(view.ts[rows], view.end[rows])
    window, ws, we = _window(bs, be, steps, window_steps)
    gs, ge, lead = _gaps(bs, be, ws, we)
    runtime = _runtime_rows(t)
    graph = _call_rows(t, runtime, graph_launch_call)
    calls = {
        "capture": _Calls(t, _call_rows(t, runtime, CAPTURE_RE.match)),
        "sync": _Calls(t, _call_rows(t, runtime, blocking_call)),
        "startup": _Calls(t, _call_rows(t, runtime, None, ONE_OFF_CALL_US)),
        "query": _Calls(t, _call_rows(t, runtime, _CAPTURE_QUERY_RE.match)),
    }
    if not calls["capture"].rows.size and not graph.size:
        calls["query"] = _Calls(t, np.empty(0, dtype=np.int64))  # no graph here: the queries are routine
    warm_up_end = float(steps.end_us[np.argmin(steps.start_us)]) if window == "steps" else np.inf
    cause = _classify(gs, ge, calls, warm_up_end)
    by_cause, sync_top = _split(t, gs, ge, cause, calls["sync"])
    length = ge - gs
    compute = rows[types[t.name[rows]] == 0]
    cs, ce = merge_intervals(view.ts[compute], view.end[compute])
    device = t.stream != -1
    kernels = rows[t.cat_mask(*KERNEL_CATS)[rows]]
    tl = Timeline(
        window=window,
        window_us=float((we - ws).sum()),
        idle_us=float(length.sum()),
        compute_us=_clip_total(cs, ce, ws, we),
        idle_by_cause_us=by_cause,
        gaps_by_cause={c: int((cause == i).sum()) for i, c in enumerate(_CAUSES)},
        before_first_kernel_us=lead if window == "steps" else 0.0,
        graph_replay_pct=_graph_replay_pct(t, kernels, graph),
        capture_calls=int(calls["capture"].rows.size + calls["query"].rows.size),
        negative_kernel_pct=100.0 * float((t.dur[device] < 0).sum()) / max(int(device.sum()), 1),
        sync_top=sync_top,
    )
    for name, label in (("capture", "graph capture/instantiate"), ("startup", "start-up")):
        hit = cause == _CAUSES.index(name)
        text = _describe(t, calls[name], gs[hit], ge[hit], label)
        if text:
            tl.one_off.append(
                f"{label}: {text} ({int(hit.sum())} gap(s), {length[hit].sum() / 1000:,.1f} ms)"
            )
    tl.notes = _notes(tl)
    return tl


def _notes(tl: Timeline) -> list[str]:
    """What the report should say about the window: one-off gaps excluded, a start-up-only trace."""
    notes = [f"one-off gap excluded from the findings: {text}" for text in tl.one_off]
    if tl.window_us > 0 and tl.one_off_us >= 0.5 * tl.window_us:
        notes.append(
            f"one-off gaps (capture, start-up) are {100 * tl.one_off_us / tl.window_us:.0f} % of the window: "
            "this trace shows mostly start-up, not the steady state; profile later steps"
        )
    if tl.negative_kernel_pct >= 50.0:
        notes.append(
            f"{tl.negative_kernel_pct:.0f} % of device events have a negative duration: GPU timings "
            "are unreliable, no utilization finding is drawn from them"
        )
    return notes
