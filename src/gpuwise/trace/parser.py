"""Streaming parse of Kineto / Chrome-trace JSON into an `EventTable`.

How (see ARCHITECTURE.md, "trace/" for the measurements behind the choice):
1. bytes arrive in bounded chunks (`reader.iter_chunks`, gzip or plain);
2. the top-level object is read up to ``"traceEvents": [``; the events are then cut into batches
   of a few MB at event boundaries (a cheap ``}, {`` search, verified by the decoder; an exact
   numpy structural scan takes over whenever that guess fails);
3. each batch is decoded by msgspec into small structs holding only the fields gpuwise reads
   (``Call stack``, ``Input Dims`` and other args are skipped without being built), then turned
   into numpy columns; the batch's Python objects are dropped before the next one is read.

So memory holds one batch of objects plus ~70 bytes of columns per event, never the whole trace.
Errors name the file and the byte / line where the JSON goes wrong.
"""

from __future__ import annotations

import gc
import json
import re
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import attrgetter
from pathlib import Path
from typing import Any, Union

import msgspec
import numpy as np
import orjson

from gpuwise.errors import GpuwiseError
from gpuwise.trace.reader import ByteCounter, iter_chunks, special_kind
from gpuwise.trace.table import EventTable, Interner, MemoryEvents

__all__ = ["BATCH_BYTES", "KNOWN_PHASES", "Progress", "parse_trace", "scan_elements"]

BATCH_BYTES = 1 << 19  # a batch's decoded objects are ~3x its bytes: 512 KB keeps the peak low, no slower
# Chrome trace-event phases (Trace Event Format spec); anything else is reported as unknown.
KNOWN_PHASES = frozenset("XBEiIMCsftbenSTpFOND()PRcvV")
Progress = Callable[[int], None]


_NAN = float("nan")


class _Args(msgspec.Struct, gc=False):
    # Defaults are what a missing key means (HTA: stream and correlation -1), as floats for np.fromiter.
    stream: Any = -1
    correlation: Any = -1
    nbytes: Any = msgspec.field(default=_NAN, name="bytes")


class _MemArgs(msgspec.Struct, gc=False):
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


class _Complete(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete event (ph "X"): CPU ops, runtime calls, kernels, copies: the rows of the table."""

    cat: Any = None
    name: Any = None
    tid: Any = None
    ts: Any = _NAN
    dur: Any = _NAN
    args: _Args | None = None


def _instant(tag: str) -> type[msgspec.Struct]:
    return msgspec.defstruct(
        f"_Instant_{tag}",
        [("name", Any, None), ("ts", Any, _NAN), ("args", _MemArgs | None, None)],
        tag_field="ph",
        tag=tag,
        gc=False,
    )


def _skipped(tag: str) -> type[msgspec.Struct]:
    """Any other phase (flows, metadata, counters...): only its timestamp is read (HTA's ts sees it)."""
    return msgspec.defstruct(f"_Phase_{ord(tag)}", [("ts", Any, _NAN)], tag_field="ph", tag=tag, gc=False)


_INSTANTS = tuple(_instant(tag) for tag in "iI")
_EVENT_TYPES: tuple[type[msgspec.Struct], ...] = (
    _Complete,
    *_INSTANTS,
    *(_skipped(tag) for tag in sorted(KNOWN_PHASES - set("XiI"))),
)
_PHASE_OF = {cls: cls.__struct_config__.tag for cls in _EVENT_TYPES}
# A union built from a runtime tuple: only typing.Union takes one (mypy cannot see the members).
_ANY_EVENT = Union[_EVENT_TYPES]  # type: ignore[valid-type]  # noqa: UP007
_STRICT = msgspec.json.Decoder(list[_ANY_EVENT])
_LENIENT = msgspec.json.Decoder(list[Any])
_NO_ARGS = _Args()
_CUT = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BYTE_POS = re.compile(r"\(byte (\d+)\)")
_WS = b" \t\r\n"
_WS_BYTES = frozenset(bytes([c]) for c in _WS)
_NON_FINITE = re.compile(rb"NaN|Infinity")


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Batches create no reference cycles: pausing the cyclic GC spares collections while they are built."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _floats(values: list[Any]) -> np.ndarray:
    """Numbers (or numeric strings) to float64; None and anything else to NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.fromiter((_to_float(v) for v in values), dtype=np.float64, count=len(values))


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _column(rows: list[Any], get: Callable[[Any], Any]) -> np.ndarray:
    """float64 column of ``get(row)``; the fast path needs every value to be a number."""
    try:
        return np.fromiter(map(get, rows), dtype=np.float64, count=len(rows))
    except (TypeError, ValueError, OverflowError):
        return _floats(list(map(get, rows)))


def _hta_stream(raw: np.ndarray) -> np.ndarray:
    """args.stream as HTA normalizes it: int(value), or -1 when missing or not a number."""
    out = np.full(raw.shape, -1, dtype=np.int64)
    ok = np.isfinite(raw) & (np.abs(raw) < 2**62)
    out[ok] = np.trunc(raw[ok]).astype(np.int64)
    return out


_TS, _DUR, _CAT, _NAME, _TID = (attrgetter(k) for k in ("ts", "dur", "cat", "name", "tid"))
_STREAM, _CORRELATION, _NBYTES = (attrgetter(k) for k in ("stream", "correlation", "nbytes"))


class _Columns:
    """Accumulates per-batch arrays; `finish` concatenates them once."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {
            k: [] for k in ("cat", "name", "tid", "ts", "dur", "stream", "correlation", "nbytes")
        }
        self.mem_parts: dict[str, list[np.ndarray]] = {
            k: [] for k in ("ts", "bytes", "total_allocated", "total_reserved", "device_type", "device_id")
        }
        self.cats, self.names, self.tids = Interner(), Interner(), Interner()
        self.phases: Counter[Any] = Counter()
        self.ts_has_float = False
        self.first_is_complete: bool | None = None
        self.count = 0

    def add(self, events: list[Any]) -> None:
        if not events:
            return
        if self.first_is_complete is None:
            self.first_is_complete = type(events[0]) is _Complete
        if not self.ts_has_float and set(map(type, map(_TS, events))) - {int}:
            self.ts_has_float = True
        kinds = Counter(map(type, events))
        for kind, n in kinds.items():
            self.phases[_PHASE_OF.get(kind, kind)] += n
        complete = (
            events if kinds.get(_Complete, 0) == len(events) else [e for e in events if type(e) is _Complete]
        )
        self.count += len(events)
        if any(kind in _INSTANTS for kind in kinds):
            self._memory(
                [e for e in events if type(e) in _INSTANTS and e.name == "[memory]" and e.args is not None]
            )
        if not complete:
            return
        p = self.parts
        p["ts"].append(_column(complete, _TS))
        p["dur"].append(_column(complete, _DUR))
        p["cat"].append(self.cats.encode(complete, _CAT))
        p["name"].append(self.names.encode(complete, _NAME))
        p["tid"].append(self.tids.encode(complete, _TID))
        args = [e.args or _NO_ARGS for e in complete]
        p["stream"].append(_hta_stream(_column(args, _STREAM)))
        corr = _column(args, _CORRELATION)
        corr[np.isnan(corr)] = -1
        p["correlation"].append(corr)
        p["nbytes"].append(_column(args, _NBYTES))

    def _memory(self, events: list[Any]) -> None:
        if not events:
            return
        m = self.mem_parts
        m["ts"].append(_column(events, _TS))
        m["bytes"].append(_floats([e.args.mem_bytes for e in events]))
        for key in ("total_allocated", "total_reserved", "device_type", "device_id"):
            m[key].append(_floats([getattr(e.args, key) for e in events]))

    def finish(
        self, path: Path, json_bytes: int, file_bytes: int, metadata: dict[str, Any], warnings: list[str]
    ) -> EventTable:
        def cat(parts: list[np.ndarray], dtype) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        c = {}  # one column at a time, its parts dropped as it is joined: the peak holds one column twice
        for k in list(self.parts):
            dtype = (
                np.float64
                if k in {"ts", "dur", "correlation", "nbytes"}
                else (np.int64 if k == "stream" else np.int32)
            )
            c[k] = cat(self.parts.pop(k), dtype)
        m = {k: cat(v, np.float64) for k, v in self.mem_parts.items()}
        return EventTable(
            path=path,
            json_bytes=json_bytes,
            file_bytes=file_bytes,
            metadata=metadata,
            events_total=self.count,
            phase_counts=dict(self.phases),
            first_event_is_row0=bool(self.first_is_complete),
            cat=c["cat"],
            name=c["name"],
            tid=c["tid"],
            ts=c["ts"],
            dur=c["dur"],
            stream=c["stream"],
            correlation=c["correlation"],
            nbytes=c["nbytes"],
            cats=self.cats.values,
            names=self.names.values,
            tids=self.tids.values,
            ts_has_float=self.ts_has_float,
            memory=MemoryEvents(**m),
            warnings=warnings,
        )


def scan_elements(buf: bytes) -> tuple[np.ndarray, int | None]:
    """Exact structure of a JSON array body that starts at element depth, outside any string.

    Returns the offsets of the closing brace/bracket of every complete top-level element, and the
    offset of the ``]`` that closes the array (None if it is not in ``buf``). Vectorized: quotes not
    escaped by an odd run of backslashes delimit strings; brackets outside strings set the depth.
    """
    a = np.frombuffer(buf, dtype=np.uint8)
    quotes = np.flatnonzero(a == 0x22)
    if quotes.size and (a[np.maximum(quotes - 1, 0)] == 0x5C).any():
        quotes = _unescaped(a, quotes)
    brackets = np.flatnonzero((a == 0x7B) | (a == 0x7D) | (a == 0x5B) | (a == 0x5D))
    brackets = brackets[(np.searchsorted(quotes, brackets) & 1) == 0]
    opening = (a[brackets] == 0x7B) | (a[brackets] == 0x5B)
    depth = np.cumsum(np.where(opening, 1, -1))
    below = np.flatnonzero(depth < 0)
    array_end = int(brackets[below[0]]) if below.size else None
    ends = brackets[(depth == 0) & ~opening]
    if array_end is not None:
        ends = ends[ends < array_end]
    return ends, array_end


def _lstrip_json_ws(buf: bytes) -> bytes:
    """``buf`` without its leading JSON whitespace. bytes.lstrip() without arguments is several times
    faster than with a set, but also strips \\v and \\f (not JSON whitespace): then the exact strip."""
    rest = buf.lstrip()
    n = len(buf) - len(rest)
    if n and (buf.find(b"\x0b", 0, n) >= 0 or buf.find(b"\x0c", 0, n) >= 0):
        return buf.lstrip(_WS)
    return rest


def _unescaped(a: np.ndarray, quotes: np.ndarray) -> np.ndarray:
    """The quotes not escaped: those after an even run of backslashes (vectorized, linear)."""
    is_bs = np.concatenate(([0], (a == 0x5C).view(np.int8), [0]))
    run_starts = np.flatnonzero(np.diff(is_bs) == 1)  # index in `a` where each backslash run begins
    after = quotes[(quotes > 0) & (a[np.maximum(quotes - 1, 0)] == 0x5C)]
    start = run_starts[np.searchsorted(run_starts, after - 1, side="right") - 1]
    escaped = after[(after - start) % 2 == 1]
    return np.setdiff1d(quotes, escaped, assume_unique=True) if escaped.size else quotes


class _StreamParser:
    def __init__(self, path: Path, progress: Progress | None) -> None:
        self.path = path
        self.counter = ByteCounter()
        self.chunks = iter_chunks(path, self.counter)
        self.progress = progress
        self.columns = _Columns()
        self.offset = 0  # absolute offset (in JSON bytes) of buf[0]
        self.eof = False
        self.after_element = False  # buf starts right after a complete event (a ',' or ']' comes next)
        self.warnings: list[str] = []
        self.odd_events: Counter[str] = Counter()

    # -- input ------------------------------------------------------------------------------
    def _pull(self) -> bytes:
        try:
            chunk = next(self.chunks)
        except StopIteration:
            self.eof = True
            return b""
        if self.progress:
            self.progress(self.counter.compressed)
        return chunk

    def _advance(self, buf: bytes, n: int) -> bytes:
        self.offset += n
        return buf[n:]

    def _where(self, buf: bytes, pos: int) -> str:
        """'byte N (line L, column C)': lines are counted only now, by re-reading up to the offset."""
        offset = self.offset + pos
        lines, line_start, seen = 0, 0, 0
        try:
            for chunk in iter_chunks(self.path):
                part = chunk[: max(0, offset - seen)]
                newline = part.rfind(b"\n")
                if newline >= 0:
                    lines += part.count(b"\n")
                    line_start = seen + newline + 1
                seen += len(chunk)
                if seen >= offset:
                    break
        except GpuwiseError:
            return f"byte {offset:,}"
        return f"byte {offset:,} (line {lines + 1:,}, column {offset - line_start + 1:,})"

    def _fail(self, what: str, buf: bytes, pos: int) -> GpuwiseError:
        return GpuwiseError(f"{self.path}: {what} at {self._where(buf, pos)}")

    # -- top level ----------------------------------------------------------------------------
    def parse(self) -> EventTable:
        with _gc_paused():
            buf, metadata = self._header()
            if metadata is None:  # bare JSON array of events
                metadata = {}
            tail = self._events(buf)
            metadata.update(self._tail(tail))
        if self.odd_events:
            for what, n in sorted(self.odd_events.items()):
                self.warnings.append(f"{n:,} {what}")
        table = self.columns.finish(
            self.path, self.counter.decompressed, self.counter.compressed, metadata, self.warnings
        )
        return table

    def _header(self) -> tuple[bytes, dict[str, Any] | None]:
        """Read up to the events array; return the bytes after ``[`` and the keys seen before it.

        Linear in the input: leading whitespace is dropped as it arrives, the header is kept as a
        list of chunks and the key is searched in each new chunk (plus the last 64 bytes before it).
        """
        parts: list[bytes] = []
        size, tail = 0, b""
        while True:
            chunk = self._pull()
            if not parts:  # nothing but whitespace (and a byte-order mark) so far
                stripped = _lstrip_json_ws(chunk).lstrip(_WS + b"\xef\xbb\xbf")
                self.offset += len(chunk) - len(stripped)
                chunk = stripped
                if not chunk:
                    if self.eof:
                        raise GpuwiseError(
                            f"{self.path}: the file is empty "
                            "(a PyTorch profiler trace is a JSON object with 'traceEvents')"
                        )
                    continue
                if chunk[:1] == b"[":
                    return self._advance(chunk, 1), None
                if chunk[:1] != b"{":
                    raise self._not_json(chunk, 0)
            parts.append(chunk)
            window, base = tail + chunk, size - len(tail)
            size += len(chunk)
            for match in _EVENTS_KEY.finditer(window):
                buf = b"".join(parts)
                try:
                    meta = orjson.loads(buf[: base + match.start()] + b'"traceEvents":null}')
                except orjson.JSONDecodeError:
                    continue
                meta.pop("traceEvents", None)
                return self._advance(buf, base + match.end()), meta
            tail = window[-64:]
            if self.eof:
                return self._no_events(b"".join(parts), 0)

    def _not_json(self, buf: bytes, lead: int) -> GpuwiseError:
        sample = buf[lead : lead + 16]
        if b"\x00" in sample or any(b > 0x7F for b in sample[:4]):
            return GpuwiseError(
                f"{self.path}: not a JSON trace (binary data at byte {lead:,}); "
                "expected a PyTorch profiler .json or .json.gz file"
            )
        return self._fail("not a JSON trace: expected '{' or '['", buf, lead)

    def _no_events(self, buf: bytes, lead: int) -> tuple[bytes, dict[str, Any]]:
        try:
            document = orjson.loads(buf)
        except orjson.JSONDecodeError as err:
            what = (
                "the JSON ends abruptly (truncated file?)"
                if err.pos >= len(buf.rstrip()) - 1
                else f"invalid JSON ({err.msg})"
            )
            raise self._fail(what, buf, min(err.pos, len(buf))) from None
        keys = ", ".join(list(document)[:8]) if isinstance(document, dict) else ""
        raise GpuwiseError(
            f"{self.path}: not a PyTorch profiler trace: no 'traceEvents' array"
            + (f" (top-level keys: {keys})" if keys else "")
        )

    # -- events ---------------------------------------------------------------------------------
    def _events(self, buf: bytes) -> bytes:
        """Decode every event batch; return the bytes after the closing ``]``."""
        while True:
            # Whitespace between events is dropped as it arrives: a buffer never grows on it.
            if buf[:1] in _WS_BYTES:
                rest = _lstrip_json_ws(buf)
                self.offset += len(buf) - len(rest)
                buf = rest
            if self.after_element:  # the previous batch ended right after an event: drop its ','
                if buf.startswith(b","):
                    buf = self._advance(buf, 1)
                    self.after_element = False
                elif buf or self.eof:
                    self.after_element = False
            if not self.eof and (len(buf) < BATCH_BYTES or self.after_element):
                buf += self._pull()
                continue
            if self.eof:
                return self._last_batch(buf)
            cut = self._guess_cut(buf)
            if cut is not None and self._decode(buf, cut[0] + 1, strict_errors=False):
                buf = self._advance(buf, cut[1])
                continue
            buf, tail = self._exact_batch(buf)
            if tail is not None:
                return tail

    @staticmethod
    def _guess_cut(buf: bytes) -> tuple[int, int] | None:
        """(offset of the last event's '}', offset of the next event's '{'), from a `}, {` search."""
        window = 1 << 16
        while True:  # search the end first: the last cut is almost always in the last 64 KiB
            start = max(0, len(buf) - window)
            last = deque(_CUT.finditer(buf, start), maxlen=1)
            if last:
                return last[0].start(), last[0].end() - 1
            if start == 0:
                return None
            window *= 4

    def _exact_batch(self, buf: bytes) -> tuple[bytes, bytes | None]:
        """Cut at the last exact element boundary; return (rest, tail if the array ended)."""
        ends, array_end = scan_elements(buf)
        if array_end is not None:
            self._decode(buf, array_end, strict_errors=True)
            rest = buf[array_end + 1 :]
            self._advance(buf, array_end + 1)
            return b"", rest
        if ends.size == 0:
            if self.eof:
                raise self._fail("the JSON ends inside an event (truncated file?)", buf, len(buf))
            return self._grow(buf), None
        end = int(ends[-1]) + 1
        self._decode(buf, end, strict_errors=True)
        self.after_element = True
        return self._advance(buf, end), None

    def _grow(self, buf: bytes) -> bytes:
        """No event ends in ``buf``: read until it doubles, so that rescanning stays linear overall."""
        parts, size = [buf], len(buf)
        while size < 2 * max(len(buf), BATCH_BYTES) and not self.eof:
            chunk = self._pull()
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)

    def _last_batch(self, buf: bytes) -> bytes:
        """At end of input: find the ``]`` that closes the events array, decode what precedes it."""
        pos, attempts = len(buf), 0
        for _ in range(64):
            pos = buf.rfind(b"]", 0, pos)
            if pos < 0 or attempts == 2:
                break
            tail = buf[pos + 1 :]
            if tail.strip(_WS) and not self._tail_ok(tail):
                continue
            attempts += 1
            if self._decode(buf, pos, strict_errors=False):
                self._advance(buf, pos + 1)
                return tail
        ends, array_end = scan_elements(buf)
        if array_end is None:
            at = int(ends[-1]) + 1 if ends.size else 0
            raise self._fail(
                "the file is truncated (the traceEvents array is never closed); the incomplete part starts",
                buf,
                at,
            )
        self._decode(buf, array_end, strict_errors=True)
        self._advance(buf, array_end + 1)
        return buf[array_end + 1 :]

    @staticmethod
    def _tail_ok(tail: bytes) -> bool:
        try:
            orjson.loads(b'{"traceEvents":null' + tail)
            return True
        except orjson.JSONDecodeError:
            return False

    def _tail(self, tail: bytes) -> dict[str, Any]:
        """Keys after the events array (Kineto writes traceName, displayTimeUnit, ... there)."""
        parts = [tail]
        while not self.eof:
            parts.append(self._pull())
        tail = b"".join(parts)
        if not tail.strip(_WS):
            return {}  # bare array form
        try:
            meta = orjson.loads(b'{"traceEvents":null' + tail)
        except orjson.JSONDecodeError as err:
            pos = max(0, err.pos - len(b'{"traceEvents":null'))
            if pos >= len(tail.rstrip()):
                raise self._fail(
                    "the JSON ends abruptly after the events (truncated file?)", tail, len(tail)
                ) from None
            raise self._fail(f"invalid JSON after the events array ({err.msg})", tail, pos) from None
        if not isinstance(meta, dict):
            return {}
        meta.pop("traceEvents", None)
        return meta

    def _decode(self, buf: bytes, end: int, strict_errors: bool) -> bool:
        """Decode buf[:end] as a run of events. False (or an error, if strict) when it is not one."""
        data = b"".join((b"[", memoryview(buf)[:end], b"]"))
        try:
            try:
                events = _STRICT.decode(data)
            except msgspec.ValidationError:  # valid JSON, odd shapes: decode generically
                events = self._lenient(data)
        except UnicodeDecodeError as err:
            if not strict_errors:
                return False
            raise self._fail("text is not valid UTF-8", buf, min(max(err.start - 1, 0), end)) from None
        except msgspec.DecodeError as err:
            if not strict_errors:
                return False
            items = _python_json(data)
            if items is not None:  # NaN / Infinity: not JSON, but Python's json.dump writes them
                self.odd_events[
                    "NaN/Infinity values (Python's json writes them, JSON has none) were read as numbers"
                ] += len(_NON_FINITE.findall(data))
                self.columns.add(self._keep_events(items))
                return True
            match = _BYTE_POS.search(str(err))
            if match is None:  # "Input data was truncated"
                raise self._fail("the JSON ends inside an event (truncated file?)", buf, end) from None
            pos = min(max(int(match.group(1)) - 1, 0), end)
            msg = str(err).split(" (byte")[0].replace("JSON is malformed: ", "")
            raise self._fail(f"invalid JSON ({msg})", buf, pos) from None
        self.columns.add(events)
        return True

    def _lenient(self, data: bytes) -> list[Any]:
        """Slow path for a batch with odd shapes: skip what is not an event, keep the rest."""
        return self._keep_events(_LENIENT.decode(data))

    def _keep_events(self, items: list[Any]) -> list[Any]:
        events: list[Any] = []
        for item in items:
            if not isinstance(item, dict):
                self.odd_events[
                    f"traceEvents entries that are not JSON objects ({type(item).__name__}) were ignored"
                ] += 1
                continue
            phase = item.get("ph")
            if not (isinstance(phase, str) and phase in KNOWN_PHASES):
                self.odd_events[f"events of unknown kind ph={phase!r} were ignored"] += 1
                continue
            args = item.get("args")
            if args is not None and not isinstance(args, dict):
                self.odd_events["events with non-object 'args' had their args ignored"] += 1
                item = {**item, "args": None}
            try:
                events.append(msgspec.convert(item, _ANY_EVENT))
            except msgspec.ValidationError:
                self.odd_events["malformed events were ignored"] += 1
        self.columns.count += len(items) - len(
            events
        )  # ignored entries still count as entries of traceEvents
        if items and not any(isinstance(item, dict) for item in items):
            kind = type(items[0]).__name__
            raise GpuwiseError(
                f"{self.path}: not a PyTorch profiler trace: the event list holds {kind}s, not event objects "
                f"(around byte {self.offset:,})"
            )
        return events


def _python_json(data: bytes) -> list[Any] | None:
    """A batch as Python's json reads it (NaN, Infinity, -Infinity allowed), or None."""
    if not _NON_FINITE.search(data):
        return None
    try:
        items = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return items if isinstance(items, list) else None


def parse_trace(path: str | Path, progress: Progress | None = None) -> EventTable:
    """Parse one trace file (``.json``, ``.json.gz``, ``.pt.trace.json``) into columns."""
    path = Path(path)
    if path.is_dir():
        raise GpuwiseError(f"{path} is a directory; pass the trace files in it (or use `gpuwise trace DIR`)")
    if not path.exists():
        raise GpuwiseError(f"{path}: no such file")
    if not path.is_file():
        raise GpuwiseError(f"{path}: {special_kind(path)}, not a regular file: pass a trace file")
    try:
        return _StreamParser(path, progress).parse()
    except RecursionError:
        raise GpuwiseError(
            f"{path}: JSON nested deeper than the parser follows: not a PyTorch profiler trace "
            "(its events nest a few levels at most)"
        ) from None
