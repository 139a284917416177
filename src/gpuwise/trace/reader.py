"""Read a trace file as a stream of decompressed byte chunks, whatever its compression.

gzip is recognised by its magic bytes, not by the file name (``.pt.trace.json`` files are
sometimes gzipped, ``.gz`` files sometimes are not). Decompression is bounded: each chunk is at
most ``chunk_bytes`` long, so a 100:1 compressed trace never inflates all at once. A corrupt or
truncated gzip stream raises a `GpuwiseError` naming the file and the compressed byte offset.
"""

from __future__ import annotations

import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuwise.errors import GpuwiseError

__all__ = ["CHUNK_BYTES", "GZIP_MAGIC", "READ_BYTES", "ByteCounter", "iter_chunks", "special_kind"]

GZIP_MAGIC = b"\x1f\x8b"
READ_BYTES = 1 << 20  # compressed bytes read per system call
CHUNK_BYTES = 1 << 20  # decompressed bytes handed to the parser at a time (peak RSS: one batch, not 8)


@dataclass
class ByteCounter:
    """How far the reader got: compressed bytes read and decompressed bytes produced."""

    compressed: int = 0
    decompressed: int = 0


def iter_chunks(
    path: Path, counter: ByteCounter | None = None, chunk_bytes: int | None = None
) -> Iterator[bytes]:
    """Yield the file's (decompressed) bytes in chunks of at most ``chunk_bytes``."""
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
        yield from _inflate(path, fh, counter, chunk_bytes)


def _inflate(path: Path, fh, counter: ByteCounter, chunk_bytes: int) -> Iterator[bytes]:
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
