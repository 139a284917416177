"""Which profiler wrote a file, told by its content (not its name), and the reader for it.

Known: PyTorch/Kineto JSON (the streaming parser), Nsight Systems SQLite exports (`nsys.py`), Nsight
``.nsys-rep`` reports (exported through ``nsys`` when it is on PATH), XLA's XPlane protobuf
(``*.xplane.pb``: jax.profiler, tf.profiler, xprof) and the Perfetto/Chrome JSON JAX writes beside it
(``*.trace.json.gz``) (`xla_trace.py`). Anything else gets one line saying what it looks like
("a SQLite file without Nsight tables", "a protobuf that is not an XPlane", "gzip of …"), exit 2.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.trace.event_rows import SOURCE_KEY
from gpuwise.trace.parser import Progress, parse_trace
from gpuwise.trace.reader import GZIP_MAGIC, iter_chunks, special_kind
from gpuwise.trace.table import EventTable

__all__ = ["HEAD_BYTES", "NSYS_EXPORT_TIMEOUT_S", "apply_source", "describe", "load_table", "sniff"]

HEAD_BYTES = 1 << 16  # bytes (decompressed) looked at to tell a format
NSYS_EXPORT_TIMEOUT_S = 600
_SQLITE_MAGIC = b"SQLite format 3\x00"
# XLA names its processes after planes ("/host:CPU", "/device:GPU:0"); Kineto never does.
_XLA_JSON = re.compile(rb'"name"\s*:\s*"/(?:host|device):[A-Za-z]')
_MAGICS = (
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF document"),
    (b"\x7fELF", "an ELF executable"),
    (b"BZh", "bzip2 data"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"\x28\xb5\x2f\xfd", "zstd data"),
    (b"\x80\x04", "a Python pickle"),
    (b"\x80\x02", "a Python pickle"),
)


def _head(path: Path) -> tuple[bytes, bytes]:
    """(raw first bytes, decompressed first bytes when gzip else the same)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(HEAD_BYTES)
    except OSError as err:
        raise GpuwiseError(f"{path}: cannot read the trace: {err.strerror or err}") from None
    if not raw.startswith(GZIP_MAGIC):
        return raw, raw
    try:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        with open(path, "rb") as fh:
            return raw, inflater.decompress(fh.read(1 << 20), HEAD_BYTES)
    except (zlib.error, OSError):
        return raw, b""


def sniff(path: Path) -> str:
    """'kineto' | 'xla-json' | 'nsys-sqlite' | 'nsys-rep' | 'xplane' | 'unknown', from the content."""
    raw, head = _head(path)
    if raw.startswith(_SQLITE_MAGIC):
        return "nsys-sqlite"
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if text[:1] in (b"{", b"["):
        return "xla-json" if _XLA_JSON.search(head) else "kineto"
    if path.name.lower().endswith(".nsys-rep") or path.name.lower().endswith(".qdrep"):
        return "nsys-rep"
    if not raw.startswith(GZIP_MAGIC) and _looks_like_xspace(raw):
        return "xplane"
    return "unknown" if raw.strip() else "kineto"  # an empty file: the JSON parser says so


def _looks_like_xspace(raw: bytes) -> bool:
    """An XSpace message starts with field 1 (planes, length-delimited): tag 0x0a, a varint length,
    then an XPlane whose fields are ids, a name starting with '/' or a known plane name."""
    if not raw.startswith(b"\x0a"):
        return False
    return bool(re.search(rb"/(host|device):|Task Environment|/host:metadata", raw[:4096]))


def describe(path: Path) -> str:
    """One line naming what a file that is no known trace looks like."""
    raw, head = _head(path)
    if raw.startswith(_SQLITE_MAGIC):
        return "a SQLite file without Nsight Systems tables"
    if raw.startswith(GZIP_MAGIC):
        inner = _kind_of(head) if head else "data that does not inflate"
        return f"gzip of {inner}"
    return _kind_of(raw)


def _kind_of(data: bytes) -> str:
    for magic, what in _MAGICS:
        if data.startswith(magic):
            return what
    if data.startswith(_SQLITE_MAGIC):
        return "a SQLite file"
    if _is_protobuf(data):
        return "a protobuf that is not an XPlane (no /host: or /device: planes)"
    sample = data[:512]
    if b"\x00" in sample or sum(b > 0x7F for b in sample) > len(sample) // 3:
        return "binary data of no known profiler format"
    first = sample.decode("utf-8", "replace").strip().splitlines()[:1]
    return f"text that is not a trace (starts with {first[0][:40]!r})" if first else "an empty file"


def _is_protobuf(data: bytes) -> bool:
    """A few well-formed protobuf fields in a row (wire types 0, 1, 2, 5 with small field numbers)."""
    pos, fields = 0, 0
    while pos < min(len(data), 256) and fields < 4:
        key, pos = _varint(data, pos)
        if key is None or key >> 3 == 0 or key >> 3 > 64:
            return False
        wire = key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if length is None or pos + length > len(data) + 1_000_000:
                return False
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            return False
        fields += 1
    return fields >= 2 or (fields == 1 and pos >= len(data))


def _varint(data: bytes, pos: int) -> tuple[int | None, int]:
    value, shift = 0, 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return None, pos


def load_table(path: str | Path, progress: Progress | None = None) -> EventTable:
    """The event table of one trace file, whichever profiler wrote it (told by content)."""
    path = Path(path)
    if path.is_dir() or not path.exists() or not path.is_file():
        if path.exists() and not path.is_dir() and not path.is_file():
            raise GpuwiseError(f"{path}: {special_kind(path)}, not a regular file: pass a trace file")
        return parse_trace(path, progress)  # its messages for directories and missing files
    kind = sniff(path)
    if kind == "kineto":
        table = parse_trace(path, progress)
        if table.num_events and all(c is None for c in table.cats) and _mentions_xla_planes(path):
            kind = "xla-json"  # XLA's events carry no "cat"; its plane names came after the first 64 KiB
        else:
            return table
    if kind == "nsys-sqlite":
        return _nsys_sqlite(path)
    if kind == "nsys-rep":
        return _nsys_rep(path)
    if kind in ("xplane", "xla-json"):
        from gpuwise.trace.xla_trace import read_xla_json, read_xplane

        return read_xplane(path) if kind == "xplane" else read_xla_json(path)
    if _is_text(path):
        return parse_trace(path, progress)  # text: the JSON parser names the line and column that fail
    raise GpuwiseError(
        f"{path}: not a profiler trace (binary data: {describe(path)}); gpuwise reads PyTorch/Kineto JSON, "
        "Nsight Systems .sqlite/.nsys-rep, XLA .xplane.pb and .trace.json.gz"
    )


def _is_text(path: Path) -> bool:
    """Plain UTF-8 text without NUL bytes (not compressed, not a binary format)."""
    raw, _ = _head(path)
    sample = raw[:512]
    if raw.startswith(GZIP_MAGIC) or b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start >= len(sample) - 3  # only a character cut at the end of the sample
    return True


def _mentions_xla_planes(path: Path) -> bool:
    """Whether the (decompressed) file names an XLA plane anywhere: one streaming pass."""
    tail = b""
    for chunk in iter_chunks(path):
        if _XLA_JSON.search(tail + chunk):
            return True
        tail = chunk[-64:]
    return False


def _nsys_sqlite(path: Path) -> EventTable:
    from gpuwise.trace.nsys import read_nsys_sqlite

    return read_nsys_sqlite(path)


def _nsys_rep(path: Path) -> EventTable:
    """Export a .nsys-rep with the nsys on PATH into a temporary SQLite file, then read that."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise GpuwiseError(
            f"{path}: an Nsight Systems report; nsys is not on PATH to export it: run "
            f"`nsys export --type sqlite --output {path.with_suffix('.sqlite').name} {path.name}` "
            "and pass the .sqlite file"
        )
    with tempfile.TemporaryDirectory(prefix="gpuwise-nsys-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        cmd = [
            nsys,
            "export",
            "--type",
            "sqlite",
            "--force-overwrite",
            "true",
            "--output",
            str(out),
            str(path),
        ]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=NSYS_EXPORT_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise GpuwiseError(f"{path}: `nsys export` failed ({err})") from None
        if done.returncode != 0 or not out.is_file():
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise GpuwiseError(f"{path}: `nsys export --type sqlite` failed: {last[0]}")
        table = _nsys_sqlite(out)
    table.path = path
    return table


def apply_source(analysis: Any, table: EventTable) -> None:
    """What the analysis cannot see in the table's rows: a TPU device kind, an XLA CPU profile."""
    source = table.metadata.get(SOURCE_KEY)
    if not isinstance(source, dict):
        return
    kind = source.get("device_kind")
    if kind and analysis.temporal is not None:
        analysis.device.kind = kind
    producer = str(source.get("producer") or "").lower()  # 'JAX 0.4.35 (jaxlib ...)', 'TensorFlow 2.18'
    if producer.startswith(("jax", "tensorflow")):
        analysis.framework = "jax" if producer.startswith("jax") else "tensorflow"  # fixes in its terms
