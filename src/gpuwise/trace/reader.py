"""Read a trace file as a stream of decompressed byte chunks, whatever its compression.

gzip is recognised by its magic bytes, not by the file name (``.pt.trace.json`` files are
sometimes gzipped, ``.gz`` files sometimes are not). Decompression is bounded: each chunk is at
most ``chunk_bytes`` long, so a 100:1 compressed trace never inflates all at once. A corrupt or
truncated gzip stream raises a `GpuwiseError` naming the file and the compressed byte offset.

A gzip file is inflated by a thread a few chunks ahead of the parser: zlib releases the GIL while it
inflates, so on a machine with a spare core decompression overlaps decoding (wall time; the CPU time
is the same), and memory holds at most ``READ_AHEAD`` more chunks.
"""

from __future__ import annotations

import queue
import stat
import threading
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError

__all__ = [
    "CHUNK_BYTES",
    "GZIP_MAGIC",
    "READ_AHEAD",
    "READ_BYTES",
    "ByteCounter",
    "iter_chunks",
    "special_kind",
]

GZIP_MAGIC = b"\x1f\x8b"
READ_BYTES = 1 << 18  # compressed bytes read per system call (the inflater copies its unconsumed tail)
CHUNK_BYTES = 1 << 19  # decompressed bytes handed to the parser at a time (peak RSS: one batch, not 8)
READ_AHEAD = 2  # decompressed chunks a gzip file's inflating thread may hold ahead of the parser (0: none)


@dataclass
class ByteCounter:
    """How far the reader got: compressed bytes read and decompressed bytes produced."""

    compressed: int = 0
    decompressed: int = 0


def iter_chunks(
    path: Path, counter: ByteCounter | None = None, chunk_bytes: int | None = None
) -> Iterator[bytes]:
    """Yield the file's (decompressed) bytes in chunks of at most ``chunk_bytes``. The counter may run
    up to ``READ_AHEAD`` chunks ahead of what was yielded (a gzip file is inflated ahead)."""
    counter = counter if counter is not None else ByteCounter()
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    try:
        fh = open(path, "rb")  # noqa: SIM115 - `with` below; only open()'s error becomes the message
    except OSError as err:
        raise GpuwiseError(f"{path}: cannot read the trace: {err.strerror or err}") from None
    with fh:
        head = fh.read(2)
        fh.seek(0)
        if head != GZIP_MAGIC:
            while block := fh.read(chunk_bytes):
                counter.compressed += len(block)
                counter.decompressed += len(block)
                yield block
            return
        inflated = _inflate(path, fh, counter, chunk_bytes)
        yield from _read_ahead(inflated, READ_AHEAD) if READ_AHEAD > 0 else inflated


class _Failed:
    """An exception raised by the inflating thread, handed to the reader to raise."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


def _read_ahead(chunks: Generator[bytes, None, None], depth: int) -> Iterator[bytes]:
    """``chunks`` produced by a thread at most ``depth`` items ahead; its errors are raised here, in
    order. Closing this generator (a reader that stops early) stops the thread and waits for it."""
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def hand_over(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for chunk in chunks:
                if not hand_over(chunk):
                    return
            hand_over(_END)
        except BaseException as err:  # every error goes to the reader, which raises it
            hand_over(_Failed(err))

    worker = threading.Thread(target=produce, name="gpuwise-inflate", daemon=True)
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        worker.join()
        chunks.close()


def _inflate(path: Path, fh, counter: ByteCounter, chunk_bytes: int) -> Generator[bytes, None, None]:
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    pending = b""
    started = False  # a member has been fed data but has not reached its end yet
    while True:
        if not pending:
            pending = fh.read(min(READ_BYTES, chunk_bytes))
            if not pending:
                break
            counter.compressed += len(pending)
        try:
            out = inflater.decompress(pending, chunk_bytes)
        except zlib.error as err:
            raise GpuwiseError(
                f"{path}: corrupt gzip data near compressed byte "
                f"{counter.compressed - len(pending):,} ({err}); "
                "re-copy or re-export the trace"
            ) from None
        pending = inflater.unconsumed_tail
        if inflater.eof:
            # Concatenated gzip members are one stream (what `cat a.gz b.gz` produces).
            rest = inflater.unused_data
            inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
            pending = rest if rest.strip(b"\x00") else b""
            if pending and not pending.startswith(GZIP_MAGIC):
                raise GpuwiseError(
                    f"{path}: unexpected data after the gzip stream at compressed byte "
                    f"{counter.compressed - len(pending):,}"
                )
            started = False
        else:
            started = True
        if out:
            counter.decompressed += len(out)
            yield out
    if started and not inflater.eof:
        raise GpuwiseError(
            f"{path}: the gzip stream is truncated (ends after {counter.compressed:,} compressed bytes, "
            f"{counter.decompressed:,} bytes of JSON); the file was cut short while copying or writing"
        )


def special_kind(path: Path) -> str:
    """What a path that exists but is not a regular file is (a FIFO would block a reader forever)."""
    mode = path.stat().st_mode
    for test, kind in (
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"
