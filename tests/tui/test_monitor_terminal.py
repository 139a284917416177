"""`gpuwise monitor` in a real pseudo-terminal (faked NVML in the child): q and Ctrl-C end it cleanly."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pty = pytest.importorskip("pty")
TESTS = Path(__file__).parents[1]
CHILD = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from fake_nvml import fake_nvml
from gpuwise.cli.app import main
with fake_nvml("healthy_and_idle"):
    main(["monitor", "--interval", "0.2"])
"""


def _read_until(fd: int, marker: bytes, timeout_s: float = 60.0) -> bytes:
    seen, end = b"", time.monotonic() + timeout_s
    while marker not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
    return seen


def _start() -> tuple[subprocess.Popen, int]:
    main_fd, child_fd = pty.openpty()
    env = {**os.environ, "COLUMNS": "150", "LINES": "60", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=child_fd, stdout=child_fd, stderr=child_fd, env=env
    )
    os.close(child_fd)
    return proc, main_fd


@pytest.mark.parametrize("stop", ["q", "ctrl-c"])
def test_the_live_view_redraws_and_quits_cleanly(stop):
    proc, fd = _start()
    try:
        first = _read_until(fd, b"gpu_idle")
        assert b"gpu_idle" in first, first[-2000:]
        again = _read_until(fd, b"KPI breaches")  # a later redraw
        assert b"KPI breaches" in again
        if stop == "q":
            os.write(fd, b"q")
        else:
            proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        tail = _read_until(fd, b"Traceback", timeout_s=1.0)
        assert b"Traceback" not in tail
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(fd)
