"""An XLA profile (planes → lines → events, as XPlane holds it) turned into the analyzer's event table.

Both XLA readers produce these planes: the XPlane protobuf (decoded by jaxlib's `ProfileData`) and the
Perfetto/Chrome JSON JAX writes beside it (a process per plane, a thread per line). What becomes what:

- device planes ``/device:GPU:N`` / ``/device:TPU:N``: on a GPU the ``Stream #S(...)`` lines hold the
  kernels (XLA emits them with ``hlo_op``, ``correlation_id``, ``memcpy_details`` stats); on a TPU the
  ``XLA Ops`` line holds the HLO ops. Copies (``MemcpyH2D`` …, ``infeed``/``outfeed``) become
  ``Memcpy HtoD (Pageable -> Device)``-style rows; other ops become kernels, with the XLA category
  (``hlo_category``, else the op's kind: fusion, convolution, dot → GEMM, all-reduce and the other
  collectives, …) appended as ``[XLA …]`` when the kernel name alone does not tell it;
- host planes (``/host:CPU``, ``/host:CUPTI``): CUDA driver/runtime calls keep their correlation ids
  (launch statistics); ``StepTraceAnnotation`` events (a ``step_num`` stat) become ``ProfilerStep#N``;
  tf.data's ``Iterator::Root`` / ``IteratorGetNext`` on the training thread is the input-pipeline wait;
  other TraceMe events are host ops. Python-tracer events (``$file:line fn``) are counted, not kept;
- a profile without device planes is XLA's CPU backend: its ops ran on host threads and are reported
  as such (a note names it an XLA profile, never a PyTorch one).

Not read: XLA module/step summary lines derived by xprof ("XLA Modules", "Steps" are used only for steps
when the host has none), HLO protos, memory profiles, TPU ICI/megacore details.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuwise.trace.event_rows import RowBuilder, SourceInfo
from gpuwise.trace.kernels import kernel_category
from gpuwise.trace.table import EventTable

__all__ = ["STREAM_PER_DEVICE", "XEvent", "XLine", "XPlane", "xla_category", "xla_table"]

STREAM_PER_DEVICE = 1_000_000
_DEVICE_RE = re.compile(r"^/device:([A-Za-z_]+):(\d+)")
_STREAM_RE = re.compile(r"^Stream #(\d+)")
_DERIVED_LINES = {
    "XLA Modules",
    "Steps",
    "Framework Name Scope",
    "Framework Ops",
    "Source code",
    "XLA TraceMe",
}
_API_RE = re.compile(r"^(cu[A-Z]\w*|cuda[A-Z]\w*|hip[A-Z]\w*)$")
_COLLECTIVES = {
    "all-reduce": "AllReduce",
    "all-gather": "AllGather",
    "reduce-scatter": "ReduceScatter",
    "all-to-all": "AllToAll",
    "ragged-all-to-all": "AllToAll",
    "collective-permute": "SendRecv",
    "collective-broadcast": "Broadcast nccl",
    "send": "SendRecv",
    "recv": "SendRecv",
}
_TRANSFERS = {"infeed": "HtoD", "outfeed": "DtoH", "send-to-host": "DtoH", "recv-from-host": "HtoD"}
_MEMCPY_NAMES = {"MemcpyH2D": "HtoD", "MemcpyD2H": "DtoH", "MemcpyD2D": "DtoD", "MemcpyP2P": "PtoP"}
_KIND_WORD = {"pageable": "Pageable", "pinned": "Pinned", "device": "Device", "managed": "Managed"}
_LOADER_RE = re.compile(r"^(Iterator::Root\b.*|IteratorGetNext\w*)$")


@dataclass
class XEvent:
    """One event: name, start and duration in µs, its stats (name → value)."""

    name: str
    start_us: float
    dur_us: float
    stats: dict[str, Any]


@dataclass
class XLine:
    """A timeline of a plane: a host thread, a GPU stream, the TPU's XLA Ops line."""

    name: str
    events: list[XEvent]


@dataclass
class XPlane:
    """A device (``/device:GPU:0``) or host (``/host:CPU``) plane with its stats and lines."""

    name: str
    stats: dict[str, Any]
    lines: list[XLine] = field(default_factory=list)


def _op_kind(name: str) -> str:
    """'all-reduce' from 'all-reduce.3', 'fusion' from 'fusion.12', 'dot' from 'dot.4'."""
    return name.split(".", 1)[0].split(" ", 1)[0].lower()


def xla_category(name: str, stats: dict[str, Any]) -> str:
    """The XLA category of a device op: hlo_category when XLA recorded it, else its HLO op's kind
    ('dot: gemm', 'convolution', 'collective: AllReduce', 'fusion', …)."""
    hlo_op = str(stats.get("hlo_op") or name)
    kind = _op_kind(hlo_op)
    base = re.sub(r"-(start|done)$", "", kind)  # async collectives: all-reduce-start / all-reduce-done
    if base in _COLLECTIVES:
        return f"collective: {_COLLECTIVES[base]}"
    category = str(stats.get("hlo_category") or "")
    if category:
        return category + (": gemm" if "dot" in category or "matmul" in category else "")
    if kind == "dot" or "gemm" in kind or "cublas" in hlo_op.lower():
        return "dot: gemm"
    return kind


def _device_name(event: XEvent) -> str:
    """The row name of a device op: its kernel name, plus the XLA category where the name does not say."""
    category = xla_category(event.name, event.stats)
    by_name = kernel_category(event.name)
    if by_name == "other" or (category.startswith("collective") and by_name != "communication"):
        return f"{event.name} [XLA {category}]"
    return event.name


def _copy(event: XEvent) -> tuple[str, float] | None:
    """(Kineto-style copy name, bytes) when the event is a host↔device transfer, else None."""
    details = str(event.stats.get("memcpy_details") or "")
    direction = _MEMCPY_NAMES.get(event.name) or _TRANSFERS.get(
        _op_kind(str(event.stats.get("hlo_op") or event.name))
    )
    if direction is None and not details:
        return None
    fields = dict(item.split(":", 1) for item in details.split() if ":" in item)
    src, dst = (_KIND_WORD.get(fields.get(k, "").lower(), "") for k in ("kind_src", "kind_dst"))
    name = f"Memcpy {direction or 'unknown'}" + (f" ({src} -> {dst})" if src and dst else "")
    if direction is None or not (src and dst):
        name += f" [XLA {event.name}]"
    size = fields.get("size") or event.stats.get("bytes") or event.stats.get("size")
    try:
        return name, float(size) if size is not None else float("nan")
    except ValueError:
        return name, float("nan")


def _ops_lines(plane: XPlane) -> list[tuple[int, XLine]]:
    """(stream id, line) of the lines holding a device's own work (no derived summary lines)."""
    streams = [(int(m.group(1)), line) for line in plane.lines if (m := _STREAM_RE.match(line.name))]
    if streams:
        return streams
    ops = [line for line in plane.lines if line.name == "XLA Ops"]
    if ops:
        return [(0, ops[0])]
    return [(i, line) for i, line in enumerate(plane.lines) if line.name not in _DERIVED_LINES]


def _add_device(builder: RowBuilder, plane: XPlane, index: int, several: bool) -> int:
    """Add one device plane's ops; return how many."""
    added = 0
    for stream, line in _ops_lines(plane):
        events = [e for e in line.events if e.dur_us >= 0 and not e.name.startswith("end: ")]
        if not events:
            continue
        stream_id = stream + (index * STREAM_PER_DEVICE if several else 0)
        groups: dict[str, tuple[list[str], list[XEvent], list[float]]] = {}
        for e in events:
            copy = _copy(e)
            if copy is not None:
                group, name, nbytes = "gpu_memcpy", copy[0], copy[1]
            elif e.name.startswith("Memset"):
                group, name, nbytes = "gpu_memset", "Memset (Device)", float("nan")
            else:
                group, name, nbytes = "kernel", _device_name(e), float("nan")
            names, rows, sizes = groups.setdefault(group, ([], [], []))
            names.append(name)
            rows.append(e)
            sizes.append(nbytes)
        for cat, (names, rows, sizes) in groups.items():
            builder.add(
                cat, names, [f"{plane.name} {line.name}"] * len(rows),
                np.array([e.start_us for e in rows]), np.array([e.dur_us for e in rows]),
                stream_id, np.array([_number(e.stats.get("correlation_id"), -1.0) for e in rows]),
                np.array(sizes),
            )  # fmt: skip
            added += len(rows)
    return added


def _number(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _step_events(host: list[XPlane], devices: list[XPlane]) -> tuple[list[XEvent], list[int], Any, str]:
    """(step events, their numbers, the thread they ran on, where they came from)."""
    marked = [
        (e, f"{p.name} {line.name}")
        for p in host
        for line in p.lines
        for e in line.events
        if "step_num" in e.stats
    ]
    if marked:
        name = Counter(e.name for e, _ in marked).most_common(1)[0][0]
        chosen = [(e, tid) for e, tid in marked if e.name == name]
        threads = Counter(tid for _, tid in chosen).most_common(1)[0][0]
        numbers = [int(_number(e.stats["step_num"], i)) for i, (e, _) in enumerate(chosen)]
        return [e for e, _ in chosen], numbers, threads, f"steps from StepTraceAnnotation {name!r}"
    for plane in devices:
        for line in plane.lines:
            if line.name == "Steps" and line.events:
                numbers = [int(_number(e.name, i)) for i, e in enumerate(line.events)]
                return line.events, numbers, None, f"steps from the device's Steps line ({plane.name})"
    return [], [], None, ""


def _add_host(builder: RowBuilder, host: list[XPlane], step_thread: Any) -> tuple[int, int]:
    """Host rows: driver/runtime calls, input-pipeline waits, TraceMe ops; (ops, python events skipped)."""
    python_skipped, xla_ops = 0, 0
    rows: dict[str, tuple[list[str], list[Any], list[XEvent]]] = {}
    for plane in host:
        for line in plane.lines:
            tid = f"{plane.name} {line.name}"
            for e in line.events:
                if e.name.startswith("$"):
                    python_skipped += 1
                    continue
                if e.name.startswith("end: ") or "step_num" in e.stats:
                    continue
                if _API_RE.match(e.name):
                    cat, name = ("cuda_runtime" if e.name.startswith("cuda") else "cuda_driver"), e.name
                elif _LOADER_RE.match(e.name) and (step_thread is None or tid == step_thread):
                    cat, name = "user_annotation", f"DataLoader.__next__ (tf.data {e.name})"
                else:
                    cat, name = "cpu_op", e.name
                    xla_ops += "hlo_op" in e.stats
                names, tids, events = rows.setdefault(cat, ([], [], []))
                names.append(name)
                tids.append(tid)
                events.append(e)
    for cat, (names, tids, events) in rows.items():
        builder.add(
            cat, names, tids, np.array([e.start_us for e in events]), np.array([e.dur_us for e in events]),
            -1, np.array([_number(e.stats.get("correlation_id"), -1.0) for e in events]),
        )  # fmt: skip
    return xla_ops, python_skipped


def _device_properties(devices: list[XPlane]) -> tuple[list[dict[str, Any]], str]:
    """Kineto-style deviceProperties from the device planes' capability stats; the device kind."""
    out: list[dict[str, Any]] = []
    kinds: set[str] = set()
    for plane in devices:
        m = _DEVICE_RE.match(plane.name)
        kind = m.group(1).upper() if m else "DEVICE"
        kinds.add(kind)
        s = plane.stats
        name = (
            s.get("device_type_string") or s.get("device_name") or s.get("device_type") or _unnamed(kind, s)
        )
        out.append(
            {
                "id": int(m.group(2)) if m else len(out),
                "name": str(name) if name else None,
                "totalGlobalMem": _int_or_none(s.get("devcap_memory_size")),
                "computeMajor": _int_or_none(s.get("devcap_compute_cap_major")),
                "computeMinor": _int_or_none(s.get("devcap_compute_cap_minor")),
            }
        )
    kind = "tpu" if "TPU" in kinds else ("" if not kinds or kinds <= {"GPU"} else sorted(kinds)[0].lower())
    return [d for d in out if d["name"]], kind


def _unnamed(kind: str, stats: dict[str, Any]) -> str | None:
    """A label for a device plane without a model name: its kind, compute capability and memory."""
    major, minor = stats.get("devcap_compute_cap_major"), stats.get("devcap_compute_cap_minor")
    memory = _int_or_none(stats.get("devcap_memory_size"))
    parts = ([f"compute capability {major}.{minor}"] if major is not None else []) + (
        [f"{memory / 2**30:.0f} GiB"] if memory else []
    )
    return f"{kind} ({', '.join(parts)})" if parts else None


def _int_or_none(value: Any) -> int | None:
    number = _number(value, float("nan"))
    return int(number) if np.isfinite(number) else None


def xla_table(path: Path, planes: list[XPlane], fmt: str, input_bytes: int | None = None) -> EventTable:
    """The event table of an XLA profile; ``fmt`` is 'xplane' or 'xla-trace-json'."""
    devices = [p for p in planes if _DEVICE_RE.match(p.name)]
    host = [p for p in planes if p.name.startswith("/host:") and p.name != "/host:metadata"]
    producer = _producer(planes)
    builder = RowBuilder()
    device_ops = sum(_add_device(builder, p, i, len(devices) > 1) for i, p in enumerate(devices))
    steps, numbers, step_thread, how = _step_events(host, devices)
    xla_host_ops, python_skipped = _add_host(builder, host, step_thread)
    if steps:
        builder.add(
            "user_annotation", [f"ProfilerStep#{n}" for n in numbers],
            [step_thread or "device steps"] * len(steps),
            np.array([e.start_us for e in steps]), np.array([e.dur_us for e in steps]),
        )  # fmt: skip
    properties, kind = _device_properties(devices)
    notes = _notes(fmt, producer, devices, device_ops, xla_host_ops, python_skipped, how)
    metadata: dict[str, Any] = {"deviceProperties": properties}
    source = SourceInfo(fmt, producer, device_kind=kind, notes=notes)
    return builder.build(path, metadata, source, list(notes), input_bytes)


def _producer(planes: list[XPlane]) -> str:
    """'JAX 0.10.2 (jaxlib 0.10.2)' from the metadata plane; else 'JAX' / 'TensorFlow' told by the host
    events each framework emits (PjitFunction(...) vs TFE_* / EagerExecute); '' when neither shows."""
    for plane in planes:
        if plane.name == "/host:metadata":
            s = plane.stats
            if s.get("jax_version"):
                jaxlib = f" (jaxlib {s['jaxlib_version']})" if s.get("jaxlib_version") else ""
                return f"JAX {s['jax_version']}{jaxlib}"
            if s.get("tf_version"):
                return f"TensorFlow {s['tf_version']}"
    names = {
        e.name for p in planes if p.name.startswith("/host:") for line in p.lines for e in line.events[:5000]
    }
    if any(n.startswith("PjitFunction(") for n in names):
        return "JAX (jax.profiler)"
    if any(n.startswith(("TFE_", "EagerExecute", "EagerLocalExecute")) for n in names):
        return "TensorFlow (tf.profiler)"
    return ""


def _notes(
    fmt: str,
    producer: str,
    devices: list[XPlane],
    device_ops: int,
    host_ops: int,
    python_skipped: int,
    how: str,
) -> list[str]:
    """The lines that say what the profile is (an XLA / TensorFlow profile, never a PyTorch one)."""
    what = "XPlane protobuf" if fmt == "xplane" else "Perfetto/Chrome trace JSON"
    tensorflow = producer.startswith("TensorFlow")
    notes = [
        f"{'a TensorFlow' if tensorflow else 'an XLA'} profile ({producer or 'producer unknown'}; {what})"
    ]
    if not devices:
        backend = "TensorFlow on the CPU" if tensorflow else "XLA CPU backend"
        ops = "TensorFlow ops" if tensorflow else f"{host_ops:,} XLA ops"
        notes.append(
            f"{backend}: no /device: planes, {ops} ran on host threads "
            "(not a CPU-only PyTorch trace; profile on the GPU/TPU for device figures)"
        )
    else:
        names = ", ".join(sorted({p.name for p in devices}))
        notes.append(f"{len(devices)} device plane(s) ({names}): {device_ops:,} device ops")
    if len(devices) > 1:
        notes.append(
            f"streams of device d are numbered d × {STREAM_PER_DEVICE:,} + stream; the breakdown spans all"
        )
    if how:
        notes.append(how)
    if python_skipped:
        notes.append(f"{python_skipped:,} Python-tracer events ($file:line) not analyzed")
    if devices and not device_ops:
        notes.append("the device planes hold no device ops")
    return notes
