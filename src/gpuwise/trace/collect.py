"""The profiles a directory holds: every format `gpuwise trace` reads, one file per profiled run.

A directory is searched at any depth (tensorboard_trace_handler and jax.profiler nest per worker and run)
for Kineto / XLA JSON (``*.json``, ``*.json.gz``), XPlane (``*.xplane.pb``) and Nsight Systems
(``*.sqlite``, ``*.nsys-rep``, ``*.qdrep``) files; the format itself is told by content when each file
is read, and a file that turns out unreadable is listed as skipped with one line. One run written twice
is read once: jax.profiler writes ``HOST.xplane.pb`` and ``HOST.trace.json.gz`` of the same events (the
XPlane is kept when jaxlib or xprof can decode it: it names its producer, so findings speak JAX or
TensorFlow; else the JSON), and ``nsys export`` leaves ``report.sqlite`` beside ``report.nsys-rep`` (the
SQLite is kept: no export needed).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROFILE_SUFFIXES", "is_profile_name", "one_file_per_run", "profiles_under"]

PROFILE_SUFFIXES = (".json", ".json.gz", ".xplane.pb", ".sqlite", ".nsys-rep", ".qdrep")
_XPLANE, _XLA_JSON = ".xplane.pb", ".trace.json.gz"
_NSYS_REPORTS = (".nsys-rep", ".qdrep")


def is_profile_name(path: Path) -> bool:
    """Does the file name end in a suffix of a format `gpuwise trace` reads (any case)?"""
    return path.name.lower().endswith(PROFILE_SUFFIXES)


def _xplane_decodable() -> bool:
    from gpuwise.trace.xla_trace import load_profile_data

    return load_profile_data() is not None


def one_file_per_run(paths: list[Path]) -> list[Path]:
    """``paths`` without the second copy of a run: the JSON twin of a decodable XPlane (else the XPlane),
    the .nsys-rep beside its exported .sqlite. Order kept."""
    names = {str(p).lower() for p in paths}
    drop: set[str] = set()
    decodable: bool | None = None
    for p in paths:
        low = str(p).lower()
        if low.endswith(_XPLANE):
            twin = low[: -len(_XPLANE)] + _XLA_JSON
            if twin in names:
                decodable = _xplane_decodable() if decodable is None else decodable
                drop.add(twin if decodable else low)
        elif low.endswith(_NSYS_REPORTS) and str(p.with_suffix(".sqlite")).lower() in names:
            drop.add(low)
    return [p for p in paths if str(p).lower() not in drop]


def profiles_under(directory: Path) -> list[Path]:
    """Profile files at any depth, one per run, in natural order; symlinked directories are not followed,
    so a link loop cannot recurse."""
    from gpuwise.trace.analyze import natural_key

    found = []
    for root, _, names in os.walk(directory):
        found += [Path(root) / n for n in names if is_profile_name(Path(n))]
    return one_file_per_run(sorted((p for p in found if p.is_file()), key=natural_key))
