"""`gpuwise monitor`: a live view of every GPU with KPI breaches and what they cost (or one snapshot)."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, console, emit, one_format
from gpuwise.errors import GpuwiseError

MIN_INTERVAL_S = 0.2


UsdPerGpuHour = Annotated[
    float | None,
    typer.Option("--usd-per-gpu-hour", help="Price of one GPU-hour (default: the catalog's on-demand)."),
]


def monitor(
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between refreshes of the live view (0.2 to 1).")
    ] = 1.0,
    host: Annotated[
        bool, typer.Option("--host", help="Also show host CPU and memory (works without an NVIDIA GPU).")
    ] = False,
    usd_per_gpu_hour: UsdPerGpuHour = None,
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
            raise NoNvml(f"{missing}; --host shows the host alone") from None
        snap, reason = host_snapshot(), str(missing)
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


def exporter(
    listen: Annotated[
        str,
        typer.Option("--listen", help="HOST:PORT to serve /metrics on (loopback unless you say otherwise)."),
    ] = "127.0.0.1:9835",
    usd_per_gpu_hour: UsdPerGpuHour = None,
    web_config: Annotated[
        str | None,
        typer.Option(
            "--web-config",
            help="Prometheus exporter-toolkit web config YAML: tls_server_config (cert_file, key_file), "
            "basic_auth_users (bcrypt hashes).",
        ),
    ] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Serve every GPU's readings to Prometheus at http://HOST:PORT/metrics until Ctrl-C.

    --web-config adds TLS and basic auth. --json, --markdown and --html print the metric reference
    (names, units, NVML source) instead.
    """
    import time

    from gpuwise.monitor import exporter as prom
    from gpuwise.report import monitor_view

    one_format(as_json, as_markdown)
    if as_json or as_markdown or html is not None:
        emit(
            {"metrics": monitor_view.metric_reference()},
            "exporter_metrics",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=monitor_view.metrics_document,
        )
        return
    from gpuwise.monitor import web_config as web

    host = prom.parse_listen(listen)[0]
    config = web.load(web_config) if web_config else web.WebConfig()
    from gpuwise.monitor.sampler import GpuSampler

    sampler = GpuSampler()
    try:
        server = prom.start(sampler, listen, usd_per_gpu_hour, config)
        warning = web.exposure_warning(host, prom.is_loopback(host), config)
        if warning:
            typer.echo(f"gpuwise: warning: {warning}", err=True)
        scheme = "https" if config.tls else "http"
        auth = " (basic auth)" if config.users else ""
        typer.echo(
            f"serving {scheme}://{listen}/metrics{auth} for {sampler.count} GPUs (Ctrl-C stops)", err=True
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            server.shutdown()
            server.server_close()
    finally:
        sampler.close()
