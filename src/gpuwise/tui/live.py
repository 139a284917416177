"""The live loop of `gpuwise monitor`: sample, build the snapshot document, redraw it with Rich Live.

The document is rendered by report/terminal.py into a buffer the width of the screen and shown as one
Rich renderable, so the live view and `--once` draw the same thing. Ctrl-C ends it; so does `q` when
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
from rich.live import Live
from rich.text import Text

from gpuwise.monitor import kpi
from gpuwise.monitor.sampler import GpuSampler, Snapshot
from gpuwise.report import monitor_view, terminal

if TYPE_CHECKING:
    from gpuwise.monitor.recorder import ResilientSampler


def rendered(
    doc_console: Console,
    sampler: GpuSampler | ResilientSampler,
    host: bool,
    usd_per_gpu_hour: float | None,
    on_sample: Callable[[Snapshot], object] | None = None,
) -> Text:
    """Take one sample and render the monitor document into ANSI text the width of ``doc_console``.

    ``on_sample`` receives the snapshot first (``--record`` writes the same sample the screen shows);
    ``usd_per_gpu_hour`` (None: no cost line) prices the snapshot.
    """
    snap = sampler.sample(host)
    if on_sample is not None:  # `--record` with the live view: the recorder writes the same sample
        on_sample(snap)
    found = kpi.verdicts(snap, usd_per_gpu_hour)
    doc = monitor_view.document(snap, found, kpi.cost(snap, found, usd_per_gpu_hour), details=False)
    buffer = io.StringIO()
    out = Console(
        file=buffer, width=doc_console.width, force_terminal=doc_console.is_terminal, color_system="standard"
    )
    terminal.render(out, doc)
    return Text.from_ansi(buffer.getvalue())


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
    with _keys() as keys, Live(console=console, auto_refresh=False, transient=False) as live:
        try:
            while refreshes is None or done < refreshes:
                started = time.monotonic()
                live.update(rendered(console, sampler, host, usd_per_gpu_hour, on_sample), refresh=True)
                done += 1
                if refreshes is not None and done >= refreshes:
                    break
                if _wait(max(0.0, interval_s - (time.monotonic() - started)), keys):
                    break
        except KeyboardInterrupt:
            pass
    return done


__all__ = ["rendered", "run"]
