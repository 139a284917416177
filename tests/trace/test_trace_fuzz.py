"""Fuzz `gpuwise trace` with mutations of real small traces: cut files, edited fields, swapped types,
huge / negative / NaN values, deep nesting, duplicated ids. Whatever the input, the CLI answers: exit 0
(analysis, maybe with warnings) or exit 2 with one line, no traceback, no hang, under a memory cap.

Sources: HTA's tests/data (an A100 CUDA-event-sync step, and the trace_compare base trace).
"""

from __future__ import annotations

import gzip
import json
import math
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from third_party import data_dir

BASES = ("hta/critical_path/cuda_event_sync/event_sync_trace.json.gz", "hta/trace_compare/base/base.json.gz")
MEMORY_CAP = 2 << 30  # address space of the CLI process: a runaway allocation fails, not the machine
RUN_TIMEOUT_S = 90  # a hang, not a slow machine: a base trace is analyzed in well under a second


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _base(rel: str) -> dict[str, Any]:
    return json.loads(gzip.decompress((data_dir() / rel).read_bytes()))


@pytest.fixture(autouse=True, scope="module")
def _bases_are_present(trace_dir) -> None:
    """The base traces are other projects' files: checked before any draw, or the module skips."""
    for rel in BASES:
        trace_dir / rel


ODD_VALUES = st.one_of(
    st.sampled_from([2**62, -(2**62), 10**300, -1, 0, 1e308, -1e308, math.nan, math.inf, -math.inf, 1e-300]),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.booleans(),
    st.none(),
    st.just([]),
    st.just({}),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
EVENT_FIELDS = ("ts", "dur", "ph", "cat", "name", "pid", "tid", "id", "args")
ARG_FIELDS = ("stream", "correlation", "device", "External id", "bytes", "Bytes", "memory bandwidth (GB/s)")
HEADER_FIELDS = ("distributedInfo", "deviceProperties", "traceEvents", "schemaVersion", "displayTimeUnit")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def mutated_trace(draw: st.DrawFn) -> bytes:
    """One real base trace with a few mutations, serialized (Python's json: NaN/Infinity literals)."""
    doc = _base(draw(st.sampled_from(BASES)))
    events = doc["traceEvents"]
    marker = None  # a JSON fragment spliced in after serializing (nesting Python's json cannot write)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["event", "arg", "header", "rank", "swap", "duplicate", "nest", "drop"]))
        i = draw(st.integers(0, max(len(events) - 1, 0)))
        if kind == "event" and events:
            if isinstance(events[i], dict):
                events[i][draw(st.sampled_from(EVENT_FIELDS))] = draw(ODD_VALUES)
        elif kind == "arg" and events and isinstance(events[i], dict):
            args = events[i].setdefault("args", {})
            if isinstance(args, dict):
                args[draw(st.sampled_from(ARG_FIELDS))] = draw(ODD_VALUES)
        elif kind == "header":
            doc[draw(st.sampled_from(HEADER_FIELDS))] = draw(ODD_VALUES)
        elif kind == "rank":
            doc["distributedInfo"] = {"rank": draw(ODD_VALUES), "world_size": draw(ODD_VALUES)}
        elif kind == "swap" and events:  # an event replaced by another JSON type
            events[i] = draw(st.sampled_from([[], "event", 7, None, [events[i]]]))
        elif kind == "duplicate" and events:  # the same event (same correlation id) many times over
            events.extend([events[i]] * draw(st.integers(1, 2000)))
        elif kind == "nest" and events and isinstance(events[i], dict):
            events[i]["args"] = "__NEST__"
            marker = _nested(draw(st.sampled_from([10, 500, 5000, 100_000])))
        elif kind == "drop" and events:
            del events[i]
    text = json.dumps(doc)
    if marker:
        text = text.replace('"__NEST__"', marker, 1)
    raw = text.encode()
    if draw(st.booleans()) and draw(st.booleans()):  # one in four: the file cut (a killed profiler)
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI failures reproduce
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(raw=mutated_trace(), as_json=st.booleans())
def test_any_mutated_trace_gets_an_answer_not_a_crash(tmp_path: Path, raw: bytes, as_json: bool) -> None:
    path = tmp_path / "mutated.json"
    path.write_bytes(raw)
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwise", "trace", str(path), *(["--json"] if as_json else [])],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=REPO,
        preexec_fn=_cap_memory,
    )
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    assert "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr[-2000:])
    if proc.returncode == 2:
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), proc.stderr
    elif as_json:
        json.loads(proc.stdout)
