"""Correlation ids that repeat (wrapped counters, concatenated profiles): HTA's merge holds a kernel once per
launch sharing its id, so k launches and k kernels on one id are k² rows. gpuwise keeps the count instead of
the copies: memory stays linear in the trace, and the idle split still equals the materialized one.

Source: PARAM's DLRM rank 0 step (param/dlrm_kineto of the third-party data), copied end to end as new steps.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from gpuwise.trace.breakdown import idle_by_stream
from gpuwise.trace.hta_selection import build_view
from gpuwise.trace.parser import parse_trace
from third_party import json_bytes

DLRM0 = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"


def replicated(source: Path, target: Path, copies: int, distinct_ids: int | None) -> Path:
    """The trace's events ``copies`` times end to end, each copy a new ProfilerStep. Correlation ids are
    made unique per copy (``distinct_ids=None``) or folded onto ``distinct_ids`` values (repeated)."""
    doc = json.loads(json_bytes(source))
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - start + 1000
    top = 1 + max(int((e.get("args") or {}).get("correlation", 0) or 0) for e in events)
    out = []
    for k in range(copies):
        for e in events:
            e = dict(e, args=dict(e["args"])) if isinstance(e.get("args"), dict) else dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += k * span
            corr = e.get("args", {}).get("correlation")
            if isinstance(corr, int):
                e["args"]["correlation"] = corr + k * top if distinct_ids is None else corr % distinct_ids
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                e["name"] = f"ProfilerStep#{k}"
            out.append(e)
    doc["traceEvents"] = out
    target.write_text(json.dumps(doc))
    return target


def test_repeated_ids_are_counted_not_copied_and_split_idle_as_copies_would(trace_dir, tmp_path):
    trace = parse_trace(replicated(trace_dir / DLRM0, tmp_path / "rep.json", 3, 16))
    view = build_view(trace)
    assert view.copies is not None and view.copies.max() > 50  # ids shared by many launches
    assert np.unique(view.rows).size == view.rows.size
    materialized = replace(view, rows=np.repeat(view.rows, view.copies), copies=None)
    assert idle_by_stream(trace, view) == idle_by_stream(trace, materialized)


def _peak_rss(path: Path) -> int:
    code = (
        "import resource, sys; from gpuwise.trace.rank import analyze_file; analyze_file(sys.argv[1]); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
    )
    cap = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))"
    proc = subprocess.run(
        [sys.executable, "-c", f"{cap}; {code}", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-400:]
    return int(proc.stdout.split()[-1])


def test_repeated_ids_cost_no_more_memory_than_unique_ones(trace_dir, tmp_path):
    # 24 steps, ids folded onto 8 values: ~9,000 launches and ~9,000 kernels per id, 10^7+ merge rows
    unique = replicated(trace_dir / DLRM0, tmp_path / "unique.json", 24, None)
    repeated = replicated(trace_dir / DLRM0, tmp_path / "repeated.json", 24, 8)
    size = repeated.stat().st_size
    assert unique.stat().st_size == pytest.approx(size, rel=0.05)
    rss_unique, rss_repeated = _peak_rss(unique), _peak_rss(repeated)
    assert rss_repeated <= rss_unique * 1.1 + size, (rss_unique / 1e6, rss_repeated / 1e6, size / 1e6)
