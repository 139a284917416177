"""`gpuwise monitor`: a live view of every GPU with KPI breaches and what they cost (or one snapshot);
`--record` keeps the history, `monitor report` turns it into the FinOps report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, console, emit, one_format
from gpuwise.errors import GpuwiseError

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuwise.exporter.dcgm_names import Naming
    from gpuwise.finops.analyze import Prices
    from gpuwise.monitor.recorder import ResilientSampler
    from gpuwise.monitor.sampler import Snapshot
    from gpuwise.monitor.series import History
    from gpuwise.monitor.tiers import Retention

__all__ = ["exporter", "monitor", "monitor_app", "report"]

MIN_INTERVAL_S = 0.2
MAX_RECORD_INTERVAL_S = 60.0

monitor_app = typer.Typer(
    no_args_is_help=False,
    invoke_without_command=True,
    add_completion=False,
)


UsdPerGpuHour = Annotated[
    float | None,
    typer.Option("--usd-per-gpu-hour", help="Price of one GPU-hour (default: the catalog's on-demand)."),
]


StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="History file (default: monitor.sqlite beside the run store)."),
]


def _interval_s(text: str, record: bool) -> float:
    from gpuwise.monitor.tiers import parse_duration

    try:
        seconds = float(text)
    except ValueError:
        seconds = parse_duration(text, "--interval")
    top = MAX_RECORD_INTERVAL_S if record else 1.0
    if not MIN_INTERVAL_S <= seconds <= top:
        raise GpuwiseError(f"--interval must be between {MIN_INTERVAL_S} and {top:g} seconds (got {text})")
    return seconds


@monitor_app.callback()
def monitor(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Print one snapshot and exit.")] = False,
    interval: Annotated[
        str,
        typer.Option(
            "--interval", help="Seconds between samples: 0.2 to 1 for the live view, up to 60s with --record."
        ),
    ] = "1",
    host: Annotated[
        bool, typer.Option("--host", help="Also show host CPU and memory (works without an NVIDIA GPU).")
    ] = False,
    record: Annotated[
        bool, typer.Option("--record", help="Append every sample to the history store (WAL SQLite).")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="With --record: no live view (for a service).")
    ] = False,
    store: StoreOption = None,
    keep_raw: Annotated[str, typer.Option("--keep-raw", help="Keep raw samples this long.")] = "6h",
    keep_minute: Annotated[str, typer.Option("--keep-minute", help="Keep 1-min buckets this long.")] = "30d",
    keep_hour: Annotated[
        str, typer.Option("--keep-hour", help="Keep 1-h buckets this long ('forever').")
    ] = "forever",
    usd_per_gpu_hour: UsdPerGpuHour = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Every GPU live: busy %, memory headroom, clocks, power, throttle reasons, PCIe, errors, processes, $/h.

    KPI breaches (busy < 80 %, idle, headroom outside 10–20 %, throttling, a downgraded PCIe link, memory
    errors) are highlighted with the finding that explains them. q or Ctrl-C quits. --json, --markdown
    and --html print one snapshot (as --once does). --record keeps the history (--quiet: headless, for a
    service); `gpuwise monitor report` reads it.
    """
    if ctx.invoked_subcommand is not None:
        return
    one_format(as_json, as_markdown)
    seconds = _interval_s(interval, record)
    if quiet and not record:
        raise GpuwiseError("--quiet only applies to --record (a headless recorder)")
    if usd_per_gpu_hour is not None and usd_per_gpu_hour < 0:
        raise GpuwiseError(f"--usd-per-gpu-hour must be 0 or more (got {usd_per_gpu_hour:g})")
    if record:
        if once or as_json or as_markdown or html is not None:
            raise GpuwiseError("--record runs until stopped: drop --once, --json, --markdown and --html")
        _record(seconds, quiet, store, (keep_raw, keep_minute, keep_hour), host, usd_per_gpu_hour)
        return
    _live_or_snapshot(
        once or as_json or as_markdown or html is not None,
        seconds,
        host,
        usd_per_gpu_hour,
        as_json,
        as_markdown,
        html,
    )


def _live_or_snapshot(
    snapshot_only: bool,
    interval_s: float,
    host: bool,
    usd_per_gpu_hour: float | None,
    as_json: bool,
    as_markdown: bool,
    html: Path | None,
) -> None:
    """One snapshot through `emit` (``snapshot_only``), else the live view until q or Ctrl-C; without
    NVML, ``--host`` still shows the host alone."""
    from gpuwise.monitor import kpi
    from gpuwise.monitor.sampler import GpuSampler, NoNvml, host_snapshot
    from gpuwise.monitor.snapshot_result import SnapshotResult
    from gpuwise.report import monitor_view

    try:
        sampler = GpuSampler()
    except NoNvml as missing:
        if not host:
            raise NoNvml(f"{missing}; --host shows the host alone") from None
        snap, reason = host_snapshot(), str(missing)
        emit(
            SnapshotResult(snap, no_gpu=reason).to_dict(),
            "monitor",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: monitor_view.host_only(snap, reason),
        )
        return
    try:
        if snapshot_only:
            snap = sampler.sample(host)
            found = kpi.verdicts(snap, usd_per_gpu_hour)
            cost = kpi.cost(snap, found, usd_per_gpu_hour)
            # only the terminal view fits the screen (Markdown and HTML keep every column)
            width = console().width if not (as_markdown or html is not None) else None
            emit(
                SnapshotResult(snap, found, cost).to_dict(),
                "monitor",
                as_json,
                as_markdown=as_markdown,
                html=html,
                document=lambda: monitor_view.document(snap, found, cost, width=width, boxed=True),
            )
            return
        from gpuwise.tui import live

        live.run(console(), sampler, interval_s, host, usd_per_gpu_hour)
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
    names: Annotated[
        str,
        typer.Option(
            "--names",
            help="gpuwise (gpuwise_* names, base units) or dcgm (dcgm-exporter's DCGM_FI_DEV_* names, units "
            "and labels, so its dashboards and alerts work).",
        ),
    ] = "gpuwise",
    top_processes: Annotated[
        int,
        typer.Option(
            "--top-processes",
            help='pid series per GPU (largest GPU memory first); the rest are summed into pid="other".',
        ),
    ] = 5,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Serve every GPU's readings to Prometheus at http://HOST:PORT/metrics until Ctrl-C.

    --web-config adds TLS and basic auth; --names dcgm serves dcgm-exporter's metric names. --json,
    --markdown and --html print the metric reference (names, units, NVML source) instead.
    """
    from gpuwise.report import monitor_view

    one_format(as_json, as_markdown)
    if names not in ("gpuwise", "dcgm"):
        raise GpuwiseError(f"--names must be gpuwise or dcgm (got {names!r})")
    if as_json or as_markdown or html is not None:
        emit(
            {"metrics": monitor_view.metric_reference(names)},
            "exporter_metrics",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: monitor_view.metrics_document(names),
        )
        return
    _serve(listen, usd_per_gpu_hour, web_config, "dcgm" if names == "dcgm" else "gpuwise", top_processes)


def _serve(
    listen: str, usd_per_gpu_hour: float | None, web_config: str | None, naming: Naming, top_processes: int
) -> None:
    """Open NVML, serve /metrics until Ctrl-C (a warning when exposed without TLS or auth)."""
    import time

    from gpuwise.exporter import scrape as prom
    from gpuwise.exporter import web_config as web

    host = prom.parse_listen(listen)[0]
    config = web.load(web_config) if web_config else web.WebConfig()
    from gpuwise.monitor.sampler import GpuSampler

    sampler = GpuSampler()
    try:
        server = prom.start(sampler, listen, usd_per_gpu_hour, config, naming, top_processes)
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


def _retention(keep: tuple[str, str, str]) -> Retention:
    from gpuwise.monitor.tiers import Retention, parse_duration

    raw, minute, hour = (
        None if text.strip().lower() == "forever" else parse_duration(text, flag)
        for text, flag in zip(keep, ("--keep-raw", "--keep-minute", "--keep-hour"), strict=True)
    )
    if raw is not None and raw < 120:
        raise GpuwiseError("--keep-raw must be at least 2m (raw samples are rolled up once a minute)")
    if minute is not None and minute < 7200:
        raise GpuwiseError("--keep-minute must be at least 2h (1-min buckets are rolled up once an hour)")
    return Retention(raw, minute, hour)


def _record(
    interval_s: float,
    quiet: bool,
    store_path: Path | None,
    keep: tuple[str, str, str],
    host: bool,
    usd_per_gpu_hour: float | None,
) -> None:
    """Record until Ctrl-C or SIGTERM (`gpuwise.monitor.record_session`), with the live view unless
    ``quiet``; says on stderr what is recorded where."""
    from gpuwise.monitor.record_session import record

    retention = _retention(keep)

    def announce(count: int, path: Path) -> None:
        typer.echo(f"recording {count} GPUs every {interval_s:g}s to {path} (Ctrl-C stops)", err=True)

    def view(sampler: ResilientSampler, on_sample: Callable[[Snapshot], object]) -> None:
        from gpuwise.tui import live

        live.run(console(), sampler, interval_s, host, usd_per_gpu_hour, on_sample=on_sample)

    record(interval_s, store_path, retention, None if quiet else view, announce)


@monitor_app.command("report")
def report(
    since: Annotated[str, typer.Option("--since", help="The window: the last 90m, 24h, 7d, 2w ...")] = "7d",
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="Where the window ends: a duration ago (2h), an ISO time (2026-11-28T06:00Z) or Unix "
            "seconds (default: now).",
        ),
    ] = None,
    store: StoreOption = None,
    prometheus: Annotated[
        str | None,
        typer.Option("--prometheus", help="Read the history from this Prometheus server instead (a fleet)."),
    ] = None,
    step: Annotated[
        str | None,
        typer.Option(
            "--step",
            help="With --prometheus: the query step (default 60s, longer beyond 8d: at most 11,520 steps).",
        ),
    ] = None,
    usd_per_gpu_hour: UsdPerGpuHour = None,
    usd_per_kwh: Annotated[
        float | None,
        typer.Option("--usd-per-kwh", help="Electricity price (default: US commercial average, EIA 2024)."),
    ] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """FinOps report of the recorded history: what the GPUs cost and what was wasted.

    Per GPU, process and user: busy-time distribution, idle GPU-hours and their $, energy (NVML counter),
    throttled time, memory headroom, KPI compliance, and the findings (idle GPUs, chronic low busy %,
    throttling, a smaller GPU). --prometheus reads a fleet's history from a Prometheus server.
    """
    import time

    from gpuwise.finops.analyze import analyze
    from gpuwise.monitor.tiers import parse_duration, parse_until
    from gpuwise.report import finops_view

    one_format(as_json, as_markdown)
    for flag, value in (("--usd-per-gpu-hour", usd_per_gpu_hour), ("--usd-per-kwh", usd_per_kwh)):
        if value is not None and value < 0:
            raise GpuwiseError(f"{flag} must be 0 or more (got {value:g})")
    if prometheus is not None and store is not None:
        raise GpuwiseError("--prometheus and --store are exclusive: one history source")
    if step is not None and prometheus is None:
        raise GpuwiseError("--step only applies to --prometheus (the local store has its own tiers)")
    window = parse_duration(since, "--since")
    end = time.time() if until is None else parse_until(until, time.time())
    history = (
        _prometheus_history(prometheus, end - window, end, step)
        if prometheus is not None
        else _local_history(store, end - window, end)
    )
    if not history.gpus:
        raise GpuwiseError(f"no GPU history in the last {since} ({history.origin})")
    prices = _prices(usd_per_gpu_hour, usd_per_kwh)
    result = analyze(history, prices)
    emit(
        result.to_dict(),
        "monitor_report",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: finops_view.document(result),
    )


def _prices(usd_per_gpu_hour: float | None, usd_per_kwh: float | None) -> Prices:
    from gpuwise.finops.analyze import Prices

    if usd_per_kwh is not None:
        return Prices(usd_per_gpu_hour, usd_per_kwh, "--usd-per-kwh")
    from gpuwise.perf.cost import cost_constants

    default = float(cost_constants()["energy"]["usd_per_kwh"])
    return Prices(usd_per_gpu_hour, default, "EIA Electric Power Monthly, US commercial average 2024")


def _local_history(path: Path | None, start: float, end: float) -> History:
    from gpuwise.monitor.history_read import load_local_history
    from gpuwise.store.history import HistoryStore

    store = HistoryStore.open(path, create=False)
    try:
        return load_local_history(store, start, end)
    finally:
        store.close()


def _prometheus_history(url: str, start: float, end: float, step: str | None) -> History:
    from gpuwise.monitor.tiers import parse_duration

    try:
        from gpuwise.finops.prometheus_source import (  # type: ignore[import-untyped,unused-ignore]  # written in parallel (issue 15 part B)
            default_step_s,
            load_history,
        )
    except ImportError as err:
        if err.name != "gpuwise.finops.prometheus_source":
            raise GpuwiseError(f"--prometheus: {err}") from None
        raise GpuwiseError(
            "--prometheus needs gpuwise.finops.prometheus_source, missing from this install"
        ) from None
    step_s = default_step_s(end - start) if step is None else parse_duration(step, "--step")
    return load_history(url, start, end, step_s)
