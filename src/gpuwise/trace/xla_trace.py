"""Read XLA profiles: the XPlane protobuf (``*.xplane.pb``) and JAX's Perfetto/Chrome JSON.

The JSON is the ``*.trace.json.gz`` jax.profiler writes beside the XPlane file.

XPlane is decoded by ``ProfileData``, the reader Google ships with jaxlib (``jax.profiler.ProfileData``,
the same library that writes the file) or with xprof (``xprof.profile_data``): no protobuf is parsed by
hand here. It is the optional ``xla`` extra (``pip install 'gpuwise[xla]'``); without it an XPlane file
gets one line saying what to install, or to pass the ``.trace.json.gz`` JAX writes beside it (read
with the standard library: no extra needed). Both become the same planes (`xla_events.py`).
"""

from __future__ import annotations

import gzip
import importlib
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from gpuwise.errors import GpuwiseError
from gpuwise.trace.table import EventTable
from gpuwise.trace.xla_events import XEvent, XLine, XPlane, xla_table

__all__ = ["load_profile_data", "read_xla_json", "read_xplane"]


def load_profile_data() -> Any:
    """The ProfileData class of jaxlib, else of xprof; None when neither is installed."""
    for module in ("jaxlib._profile_data", "jax.profiler"):  # jaxlib's reader (0.16 s), else through jax
        try:
            return importlib.import_module(module).ProfileData
        except (ImportError, AttributeError):
            continue
    try:
        from xprof.profile_data import ProfileData as XprofProfileData  # type: ignore[import-not-found]

        return XprofProfileData
    except ImportError:
        return None


def read_xplane(path: Path) -> EventTable:
    """An ``*.xplane.pb`` file (jax.profiler, tf.profiler, xprof) as an `EventTable`."""
    profile_data = load_profile_data()
    if profile_data is None:
        raise GpuwiseError(
            f"{path}: an XLA XPlane profile; reading it needs the XPlane reader that ships with jaxlib: "
            "pip install 'gpuwise[xla]' (or pass the .trace.json.gz written beside it)"
        )
    try:
        data = profile_data.from_file(str(path))
        planes = [_plane(p) for p in data.planes]
    except Exception as err:
        raise GpuwiseError(f"{path}: the XPlane protobuf cannot be decoded ({str(err)[:200]})") from None
    return xla_table(path, planes, "xplane")


def _plane(plane: Any) -> XPlane:
    lines = []
    for line in plane.lines:
        events = [
            XEvent(e.name, e.start_ns / 1000.0, e.duration_ns / 1000.0, dict(e.stats) if e.stats else {})
            for e in line.events
        ]
        lines.append(XLine(line.name, events))
    return XPlane(plane.name, dict(plane.stats) if plane.stats else {}, lines)


def read_xla_json(path: Path) -> EventTable:
    """JAX's ``*.trace.json.gz`` (Perfetto/Chrome trace events, a process per plane) as an `EventTable`."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise GpuwiseError(f"{path}: corrupt or truncated gzip data ({err})") from None
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise GpuwiseError(f"{path}: the XLA trace JSON is invalid or truncated ({err})") from None
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise GpuwiseError(f"{path}: not an XLA trace: no 'traceEvents' array")
    return xla_table(path, _planes_of(events), "xla-trace-json", len(raw))


def _planes_of(events: list[Any]) -> list[XPlane]:
    """Group complete events by process (plane) and thread (line), named by the metadata events."""
    process: dict[Any, str] = {}
    thread: dict[tuple[Any, Any], str] = {}
    by_line: dict[tuple[Any, Any], list[XEvent]] = defaultdict(list)
    for e in events:
        if not isinstance(e, dict):
            continue
        phase = e.get("ph")
        if phase == "M":
            name = (e.get("args") or {}).get("name") if isinstance(e.get("args"), dict) else None
            if e.get("name") == "process_name" and name:
                process[e.get("pid")] = str(name)
            elif e.get("name") == "thread_name" and name:
                thread[(e.get("pid"), e.get("tid"))] = str(name)
        elif phase == "X":
            try:
                start, dur = float(e["ts"]), float(e.get("dur", 0.0))
            except (KeyError, TypeError, ValueError):
                continue
            args = e.get("args")
            by_line[(e.get("pid"), e.get("tid"))].append(
                XEvent(str(e.get("name", "")), start, dur, args if isinstance(args, dict) else {})
            )
    planes: dict[Any, XPlane] = {}
    for (pid, tid), line_events in by_line.items():
        plane = planes.setdefault(pid, XPlane(process.get(pid, f"/host:pid {pid}"), {}))
        plane.lines.append(XLine(thread.get((pid, tid), str(tid)), line_events))
    return list(planes.values())
