"""Read throughput of a data directory (sequential and random), honest about the page cache.

Before each timed read the files' cached pages are dropped with posix_fadvise(DONTNEED) (works
without root for clean pages), then a sample of blocks is probed with preadv(RWF_NOWAIT), which
only succeeds for cached data: the share that succeeds is reported, so a figure served from RAM
is never passed off as the disk's.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

from gpuwise.bench.types import StorageFigure
from gpuwise.errors import GpuwiseError

SEQUENTIAL_BLOCK = 1 << 20  # 1 MiB: large reads, as a streaming loader does
RANDOM_BLOCK = 128 << 10  # 128 KiB: about one image or one packed sample per read
PROBES = 64


def data_files(root: Path, limit: int = 10_000) -> list[Path]:
    """Regular non-empty files under `root` (or `root` itself), largest first."""
    if not root.exists():
        raise GpuwiseError(f"no such file or directory: {root}")
    if root.is_file():
        return [root]

    def walk() -> Iterator[Path]:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                yield Path(dirpath) / name

    files = []
    for path in walk():
        try:
            if path.is_file() and path.stat().st_size > 0:
                files.append(path)
        except OSError:
            continue
        if len(files) >= limit:
            break
    if not files:
        raise GpuwiseError(f"{root} holds no readable non-empty files to benchmark")
    return sorted(files, key=lambda p: p.stat().st_size, reverse=True)


def drop_cached(fd: int) -> None:
    """Ask the kernel to drop the file's clean cached pages (posix_fadvise DONTNEED; no root needed), so the
    next read comes from the disk. Does nothing where posix_fadvise does not exist.
    """
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def cached_fraction(fd: int, size: int, block: int, rng: random.Random) -> float | None:
    """Share of sampled blocks the page cache holds (None where RWF_NOWAIT does not exist)."""
    nowait = getattr(os, "RWF_NOWAIT", None)
    if nowait is None or size == 0:
        return None
    buf = bytearray(min(block, 4096))
    hits = 0
    for _ in range(PROBES):
        try:
            hits += os.preadv(fd, [buf], rng.randrange(0, max(1, size - len(buf))), nowait) > 0
        except BlockingIOError:
            pass
        except OSError:
            return None
    return hits / PROBES


def _read_plan(files: list[Path], budget_bytes: int) -> list[tuple[Path, int]]:
    plan, total = [], 0
    for path in files:
        size = path.stat().st_size
        take = min(size, budget_bytes - total)
        if take <= 0:
            break
        plan.append((path, take))
        total += take
    return plan


def _measure(
    plan: list[tuple[Path, int]], block: int, randomly: bool, rng: random.Random
) -> tuple[int, float, list[float]]:
    read = 0
    elapsed = 0.0
    fractions = []
    buf = bytearray(block)
    for path, take in plan:
        fd = os.open(path, os.O_RDONLY)
        try:
            drop_cached(fd)
            fraction = cached_fraction(fd, take, block, rng)
            if fraction is not None:
                fractions.append(fraction)
            offsets = list(range(0, take, block))
            if randomly:
                rng.shuffle(offsets)
            start = time.perf_counter()
            for offset in offsets:
                read += os.preadv(fd, [buf], offset)
            elapsed += time.perf_counter() - start
        finally:
            os.close(fd)
    return read, elapsed, fractions


def storage_figures(root: Path, budget_bytes: int, seed: int = 0) -> list[StorageFigure]:
    """Sequential 1 MiB and random 128 KiB reads of up to `budget_bytes` of the largest files."""
    plan = _read_plan(data_files(root), budget_bytes)
    rng = random.Random(seed)
    figures = []
    for pattern, block in (("sequential", SEQUENTIAL_BLOCK), ("random", RANDOM_BLOCK)):
        read, elapsed, fractions = _measure(plan, block, pattern == "random", rng)
        cached = sum(fractions) / len(fractions) if fractions else None
        figures.append(
            StorageFigure(str(root), pattern, block, read, max(elapsed, 1e-9), cached, _note(cached))  # type: ignore[arg-type]  # pattern is one of the two literals above
        )
    return figures


def _note(cached: float | None) -> str:
    if cached is None:
        return "page-cache state unknown (no RWF_NOWAIT here): the figure may be RAM speed"
    if cached >= 0.5:
        return f"{cached:.0%} of sampled blocks stayed in the page cache after DONTNEED: mostly RAM speed"
    return f"read from storage ({cached:.0%} of sampled blocks cached)"


def scratch_file(directory: Path, size_bytes: int) -> Path:
    """A file of incompressible bytes, flushed to disk so DONTNEED can drop it from the cache."""
    path = directory / "gpuwise-bench-storage.bin"
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as handle:
        for _ in range(max(1, size_bytes // len(chunk))):
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    return path


__all__ = ["cached_fraction", "data_files", "drop_cached", "scratch_file", "storage_figures"]
