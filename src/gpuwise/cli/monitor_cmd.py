"""`gpuwise monitor`: a live view of every GPU with KPI breaches and what they cost (or one snapshot)."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, console, emit, one_format
from gpuwise.errors import GpuwiseError

MIN_INTERVAL_S = 0.2


def monitor(
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between refreshes of the live view (0.2 to 1).")
    ] = 1.0,
    host: Annotated[
        bool, typer.Option("--host", help="Also show host CPU and memory (works without an NVIDIA GPU).")
    ] = False,
    usd_per_gpu_hour: Annotated[
        float | None,
        typer.Option("--usd-per-gpu-hour", help="Price of one GPU-hour (default: the catalog's on-demand)."),
    ] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Every GPU live: busy %, memory headroom, clocks, power, throttle reasons, PCIe, errors, processes, $/h.

    KPI breaches (busy < 80 %, idle, headroom outside 10–20 %, throttling, a downgraded PCIe link, memory
    errors) are highlighted with the finding that explains them. q or Ctrl-C quits. --json, --markdown
    and --html print one snapshot (as --once does).
    """
    one_format(as_json, as_markdown)
    if not MIN_INTERVAL_S <= interval <= 1.0:
        raise GpuwiseError(f"--interval must be between {MIN_INTERVAL_S} and 1 second (got {interval:g})")
    if usd_per_gpu_hour is not None and usd_per_gpu_hour < 0:
        raise GpuwiseError(f"--usd-per-gpu-hour must be 0 or more (got {usd_per_gpu_hour:g})")
    from gpuwise.monitor import kpi
    from gpuwise.monitor.sampler import GpuSampler, NoNvml, host_snapshot
    from gpuwise.report import monitor_view

    try:
        sampler = GpuSampler()
    except NoNvml as missing:
        if not host:
            raise
        snap, reason = host_snapshot(), str(missing).split(";")[0]
        emit(
            {**snap.to_dict(), "verdicts": [], "cost": None, "no_gpu": reason},
            "monitor",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: monitor_view.host_only(snap, reason),
        )
        return
    try:
        if once or as_json or as_markdown or html is not None:
            snap = sampler.sample(host)
            found = kpi.verdicts(snap)
            cost = kpi.cost(snap, found, usd_per_gpu_hour)
            payload = {
                **snap.to_dict(),
                "verdicts": [v.to_dict() for v in found],
                "cost": {
                    "usd_per_hour": cost.usd_per_hour,
                    "idle_usd_per_hour": cost.idle_usd_per_hour,
                    "price_source": cost.price_source,
                },
            }
            emit(
                payload,
                "monitor",
                as_json,
                as_markdown=as_markdown,
                html=html,
                document=lambda: monitor_view.document(snap, found, cost),
            )
            return
        from gpuwise.monitor import live

        live.run(console(), sampler, interval, host, usd_per_gpu_hour)
    finally:
        sampler.close()
