"""NVTX ranges and marks of an Nsight Systems export: host annotations, training steps, input waits.

Steps, first source found wins (each is a convention users already follow):
1. ``ProfilerStep#N`` ranges (PyTorch's profiler schedule, as NVTX under ``emit_nvtx``);
2. gpuwise's own marks ``gpuwise.step N`` (``gpuwise profile`` emits one as step N closes, so step N
   runs from mark N-1 to mark N; the first step, without a start mark, is not counted);
3. the user's ranges named like ``step 12``, ``train_step#3``, ``iteration 7``, ``batch_5``.

gpuwise's ``gpuwise.data_wait`` ranges are the time the loop waits for the next batch: they become
rows named ``DataLoader.__next__ (NVTX gpuwise.data_wait)`` so the shared step statistics count them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from gpuwise.trace.event_rows import RowBuilder

__all__ = ["USER_STEP_RE", "read_nvtx", "step_rows"]

USER_STEP_RE = re.compile(r"^(?:train(?:ing)?[ _-]?)?(?:step|iteration|iter|batch)[\s#_:=-]*(\d+)$", re.I)
_PROFILER_STEP_RE = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")
_GPUWISE_STEP_RE = re.compile(r"^gpuwise\.step (\d+)$")
_DATA_WAIT = "gpuwise.data_wait"
LOADER_NAME = "DataLoader.__next__ (NVTX gpuwise.data_wait)"


def read_nvtx(schema: Any, builder: RowBuilder, tid_label: Callable[[int], str]) -> list[str]:
    """Add NVTX ranges (``user_annotation``) and the steps they define; return notes."""
    if "NVTX_EVENTS" not in schema.tables:
        return ["no NVTX_EVENTS table: no annotations or steps from NVTX (profile with --trace=cuda,nvtx)"]
    have = schema.columns("NVTX_EVENTS")
    wanted = ("start", "end", "text", "textId", "globalTid")
    cols = ", ".join(c if c in have else "NULL" for c in wanted)
    ranges: list[tuple[float, float, str, int]] = []
    marks: list[tuple[float, str, int]] = []
    for start, end, text, text_id, gtid in schema.db.execute(f"SELECT {cols} FROM NVTX_EVENTS").fetchall():
        if start is None:
            continue
        name = str(text) if text is not None else (schema.text(text_id) if text_id is not None else "")
        if not name:
            continue
        if end is None:
            marks.append((float(start), name, int(gtid or 0)))
        elif end >= start:
            ranges.append((float(start), float(end), name, int(gtid or 0)))
    steps, how = step_rows(ranges, marks)
    plain = [r for r in ranges if not _PROFILER_STEP_RE.match(r[2])]
    if plain:
        names = [LOADER_NAME if r[2] == _DATA_WAIT else r[2] for r in plain]
        _add(builder, "user_annotation", names, plain, tid_label)
    if steps:
        _add(builder, "user_annotation", [f"ProfilerStep#{n}" for n in steps[1]], steps[0], tid_label)
    return [how] if how else []


def _add(
    builder: RowBuilder,
    cat: str,
    names: list[str],
    ranges: list[tuple[float, float, str, int]],
    tid_label: Callable[[int], str],
) -> None:
    start = np.array([r[0] for r in ranges], dtype=np.float64)
    end = np.array([r[1] for r in ranges], dtype=np.float64)
    builder.add(cat, names, [tid_label(r[3]) for r in ranges], start / 1000.0, (end - start) / 1000.0)


def step_rows(
    ranges: list[tuple[float, float, str, int]], marks: list[tuple[float, str, int]]
) -> tuple[tuple[list[tuple[float, float, str, int]], list[int]] | None, str]:
    """(step ranges and their numbers, where they came from), or (None, '') when no convention fits."""
    profiler = [(r, int(m.group(1))) for r in ranges if (m := _PROFILER_STEP_RE.match(r[2]))]
    if profiler:
        return ([r for r, _ in profiler], [n for _, n in profiler]), "steps from NVTX ProfilerStep#N ranges"
    ours = sorted((t, int(m.group(1)), tid) for t, name, tid in marks if (m := _GPUWISE_STEP_RE.match(name)))
    if len(ours) >= 2:
        spans = [(a[0], b[0], "", b[2]) for a, b in itertools.pairwise(ours)]
        return (spans, [b[1] for b in ours[1:]]), "steps from gpuwise's NVTX marks (gpuwise.step N)"
    user = [(r, int(m.group(1))) for r in ranges if (m := USER_STEP_RE.match(r[2].strip()))]
    if len(user) >= 2:
        return ([r for r, _ in user], [n for _, n in user]), (
            f"steps from the user's NVTX ranges (e.g. {user[0][0][2]!r})"
        )
    return None, ""
