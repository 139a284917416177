"""The live loop of `gpuwise monitor`: sample, build the snapshot document, redraw it in place.

The same document as `--once`, fitted to the screen's width (columns dropped in monitor_view.DROP_ORDER's
order) and drawn by tui/frame.py as plain lines with ANSI styles: the cursor goes home, each line
overwrites the last frame's and the rest of the screen is cleared, so nothing flickers and a frame costs
a few ms of CPU (Rich's table layout cost ~30 ms a frame, issue 30). Ctrl-C ends it; so does `q` when
stdin is a terminal (read in cbreak mode, restored on exit).
"""

from __future__ import annotations

import contextlib
import io
import select
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from rich.console import Console

from gpuwise.monitor import kpi
from gpuwise.monitor.sampler import GpuSampler, Snapshot
from gpuwise.report import monitor_view
from gpuwise.tui import frame

if TYPE_CHECKING:
    from gpuwise.monitor.recorder import ResilientSampler


def rendered(
    doc_console: Console,
    sampler: GpuSampler | ResilientSampler,
    host: bool,
    usd_per_gpu_hour: float | None,
    on_sample: Callable[[Snapshot], object] | None = None,
) -> list[str]:
    """Take one sample and lay the monitor document out as lines the width of ``doc_console`` (ANSI
    styles on a terminal).

    ``on_sample`` receives the snapshot first (``--record`` writes the same sample the screen shows);
    ``usd_per_gpu_hour`` (None: no cost line) prices the snapshot.
    """
    snap = sampler.sample(host)
    if on_sample is not None:  # `--record` with the live view: the recorder writes the same sample
        on_sample(snap)
    found = kpi.verdicts(snap, usd_per_gpu_hour)
    width = doc_console.width
    cost = kpi.cost(snap, found, usd_per_gpu_hour)
    doc = monitor_view.document(snap, found, cost, details=False, width=width)
    return frame.lines(doc, width, color=doc_console.is_terminal and not doc_console.no_color)


def _draw(console: Console, lines: list[str], first: bool) -> None:
    """One frame: on a terminal in place (cursor home, lines cropped to the screen's height, the rest
    cleared); elsewhere appended, one frame after the other."""
    out = console.file
    if console.is_terminal:
        shown = lines[: max(console.height - 1, 1)]
        out.write(("\x1b[2J" if first else "") + "\x1b[H" + "\x1b[K\n".join(shown) + "\x1b[K\n\x1b[J")
    else:
        out.write("\n".join(lines) + "\n\n")
    out.flush()


@contextlib.contextmanager
def _keys() -> Iterator[bool]:
    """cbreak mode on a terminal stdin (so `q` arrives without Enter); yields whether keys can be read."""
    try:
        import termios
        import tty

        fd = sys.stdin.fileno()
        if not sys.stdin.isatty():
            raise OSError
        saved = termios.tcgetattr(fd)
    except (ImportError, OSError, ValueError, io.UnsupportedOperation):
        yield False
        return
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _wait(seconds: float, keys: bool) -> bool:
    """Sleep ``seconds``; True when the user pressed q."""
    if not keys:
        time.sleep(seconds)
        return False
    ready, _, _ = select.select([sys.stdin], [], [], seconds)
    return bool(ready) and sys.stdin.read(1).lower() == "q"


def run(
    console: Console,
    sampler: GpuSampler | ResilientSampler,
    interval_s: float = 1.0,
    host: bool = False,
    usd_per_gpu_hour: float | None = None,
    refreshes: int | None = None,
    on_sample: Callable[[Snapshot], object] | None = None,
) -> int:
    """Redraw every ``interval_s`` until q, Ctrl-C or ``refreshes`` redraws; returns the redraws made."""
    done = 0
    if console.is_terminal:
        console.file.write("\x1b[?25l")  # hide the cursor while drawing
    with _keys() as keys:
        try:
            while refreshes is None or done < refreshes:
                started = time.monotonic()
                _draw(console, rendered(console, sampler, host, usd_per_gpu_hour, on_sample), done == 0)
                done += 1
                if refreshes is not None and done >= refreshes:
                    break
                if _wait(max(0.0, interval_s - (time.monotonic() - started)), keys):
                    break
        except KeyboardInterrupt:
            pass
        finally:
            if console.is_terminal:
                console.file.write("\x1b[?25h")
                console.file.flush()
    return done


__all__ = ["rendered", "run"]
