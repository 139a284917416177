"""The live view at 80, 90 and 120 columns (faked NVML: busy, idle, throttled, lost and ECC-error GPUs):
no line wider than the screen, every GPU's name and the LOST marker kept, columns given up in
monitor_view.DROP_ORDER's order and only as many as the width needs; a real terminal gets the frame
drawn in place."""

from __future__ import annotations

import io
import re
from unittest import mock

import pynvml
import pytest
from rich.console import Console

from fake_nvml import FakeNvml, scenario
from gpuwise.monitor.sampler import GpuSampler
from gpuwise.report.monitor_view import DROP_ORDER
from gpuwise.tui import live

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GPU_COLUMNS = ["GPU", "name", "busy %", "memory GiB", "headroom", "SM MHz", "mem MHz", "power W", "°C"]
HEALTH_COLUMNS = ["GPU", "clock reasons", "PCIe", "PCIe tx/rx GB/s", "memory errors", "energy kWh"]


def gpus() -> list[dict]:
    return (
        scenario("healthy_and_idle")
        + scenario("throttled")
        + [{**scenario("lost_mid_run")[1], "name": "NVIDIA H100 80GB HBM3"}]
        + scenario("ecc_errors")
    )


def frame(width: int, terminal: bool = False) -> str:
    buffer = io.StringIO()
    screen = Console(file=buffer, width=width, height=80, force_terminal=terminal)
    with mock.patch.multiple(pynvml, **FakeNvml(gpus()).patches()):
        sampler = GpuSampler()
        assert live.run(screen, sampler, interval_s=0.01, refreshes=2, usd_per_gpu_hour=2.0) == 2
        sampler.close()
    return buffer.getvalue()


def header(text: str, first: str) -> list[str]:
    """The column names of the table whose header line starts with ``first`` (split on 2+ spaces)."""
    line = next(ln for ln in text.splitlines() if ln.startswith(first))
    return re.split(r"\s{2,}", line.strip())


@pytest.mark.parametrize(
    "width, gpu_dropped, health_dropped",
    [
        (80, ["mem MHz", "headroom"], ["energy kWh", "PCIe tx/rx GB/s"]),
        (90, ["mem MHz"], ["energy kWh", "PCIe tx/rx GB/s"]),
        (120, [], []),
    ],
)
def test_columns_dropped_in_the_stated_order_and_names_kept(width, gpu_dropped, health_dropped):
    text = frame(width).split("\n\n")[-2]  # the last frame
    assert all(len(line) <= width for line in text.splitlines()), max(text.splitlines(), key=len)
    assert header(text, "GPU  name") == [c for c in GPU_COLUMNS if c not in gpu_dropped]
    assert header(text, "GPU  clock reasons") == [c for c in HEALTH_COLUMNS if c not in health_dropped]
    assert DROP_ORDER["gpus"][: len(gpu_dropped)] == tuple(gpu_dropped)
    assert DROP_ORDER["health"][: len(health_dropped)] == tuple(health_dropped)
    rows = [ln for ln in text.splitlines() if re.match(r"\d\s{2,}\S", ln)]
    names = {ln.split()[0]: ln for ln in rows if "A100" in ln or "H100" in ln}
    assert set(names) == {"0", "1", "2", "3", "4"}
    assert "H100 80GB HBM3 (LOST)" in names["3"]  # whole, on one line
    assert all("A100-SXM4-80GB" in names[i] for i in "0124")
    assert "gpu_lost" in text and "throttling" in text


def test_a_terminal_gets_the_frame_in_place_with_styles():
    drawn = frame(80, terminal=True)
    assert drawn.startswith("\x1b[?25l\x1b[2J\x1b[H") and drawn.endswith("\x1b[?25h")
    assert drawn.count("\x1b[H") == 2 and drawn.count("\x1b[2J") == 1  # cleared once, then overwritten
    assert "\x1b[1;31m" in drawn  # the lost GPU's row in bold red
    plain = ANSI.sub("", drawn.split("\x1b[H")[-1])
    assert all(len(line) <= 80 for line in plain.splitlines())
    assert "H100 80GB HBM3 (LOST)" in plain


@pytest.mark.parametrize("width", [80, 90])
def test_once_on_a_narrow_terminal_keeps_names_and_lost(width):
    """`monitor --once` draws Rich box tables (report/terminal.py): fitted with their box lines counted."""
    from gpuwise.monitor import kpi
    from gpuwise.report import monitor_view, terminal

    with mock.patch.multiple(pynvml, **FakeNvml(gpus()).patches()):
        sampler = GpuSampler()
        sampler.sample()
        snap = sampler.sample()  # GPU 3 is lost from its second sample on
        sampler.close()
    found = kpi.verdicts(snap, 2.0)
    doc = monitor_view.document(snap, found, kpi.cost(snap, found, 2.0), width=width, boxed=True)
    buffer = io.StringIO()
    terminal.render(Console(file=buffer, width=width, force_terminal=False), doc)
    text = buffer.getvalue()
    assert all(len(line.rstrip()) <= width for line in text.splitlines())
    assert "H100 80GB HBM3 (LOST)" in text and text.count("A100-SXM4-80GB") >= 4
    assert "mem MHz" not in text and "power W" in text and "°C" in text
