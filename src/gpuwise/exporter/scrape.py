"""`gpuwise exporter`: the monitor's readings as a Prometheus endpoint (prometheus_client).

Prometheus naming: the `gpuwise_` prefix, base units (bytes, watts, joules, celsius, hertz, ratios 0-1),
`_total` on counters; labels gpu (index), uuid, name, hostname. The GPUs are read when Prometheus scrapes,
so a reading is never older than the scrape. A field NVML cannot read is left out (Prometheus' way of
saying n/a). Processes carry pid, user and process name only: command lines and environments hold secrets.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from gpuwise.errors import GpuwiseError
from gpuwise.exporter.web_config import WebConfig, serve
from gpuwise.monitor import kpi
from gpuwise.monitor.nvml_sample import REASON_BITS
from gpuwise.monitor.reading import GpuReading
from gpuwise.monitor.sampler import GpuSampler

DEFAULT_LISTEN = "127.0.0.1:9835"
LABELS = ("gpu", "uuid", "name", "hostname")
MetricType = Literal["gauge", "counter"]


def _ratio(pct: float | None) -> float | None:
    return None if pct is None else pct / 100.0


def _hertz(mhz: float | None) -> float | None:
    return None if mhz is None else mhz * 1e6


@dataclass(frozen=True)
class Metric:
    """One exported metric: its name without the ``gpuwise_`` prefix (counters also without ``_total``), its
    Prometheus type, help text, the NVML call it comes from, and how to read it from a ``GpuReading`` in
    base units (None: NVML could not read it, and the sample is left out).
    """

    name: str  # without the gpuwise_ prefix (counters: without _total)
    type: MetricType
    help: str
    source: str  # the NVML call
    value: Callable[[GpuReading], float | None]


METRICS: tuple[Metric, ...] = (
    Metric("gpu_busy_ratio", "gauge", "Share of the last period a kernel ran (not SM occupancy)",
           "nvmlDeviceGetUtilizationRates.gpu", lambda r: _ratio(r.busy_pct)),
    Metric("gpu_memory_busy_ratio", "gauge", "Share of the last period device memory was read or written",
           "nvmlDeviceGetUtilizationRates.memory", lambda r: _ratio(r.memory_busy_pct)),
    Metric("gpu_memory_used_bytes", "gauge", "Device memory in use", "nvmlDeviceGetMemoryInfo.used",
           lambda r: r.memory_used_bytes),
    Metric("gpu_memory_total_bytes", "gauge", "Device memory", "nvmlDeviceGetMemoryInfo.total",
           lambda r: r.memory_total_bytes),
    Metric("gpu_sm_clock_hertz", "gauge", "SM clock", "nvmlDeviceGetClockInfo(SM)",
           lambda r: _hertz(r.sm_clock_mhz)),
    Metric("gpu_sm_clock_max_hertz", "gauge", "Highest SM clock", "nvmlDeviceGetMaxClockInfo(SM)",
           lambda r: _hertz(r.sm_clock_max_mhz)),
    Metric("gpu_memory_clock_hertz", "gauge", "Memory clock", "nvmlDeviceGetClockInfo(MEM)",
           lambda r: _hertz(r.memory_clock_mhz)),
    Metric("gpu_memory_clock_max_hertz", "gauge", "Highest memory clock", "nvmlDeviceGetMaxClockInfo(MEM)",
           lambda r: _hertz(r.memory_clock_max_mhz)),
    Metric("gpu_power_watts", "gauge", "Power draw (1 s average on Ampere+ except GA100, else instantaneous)",
           "nvmlDeviceGetPowerUsage", lambda r: r.power_w),
    Metric("gpu_power_limit_watts", "gauge", "Enforced power limit", "nvmlDeviceGetEnforcedPowerLimit",
           lambda r: r.power_limit_w),
    Metric("gpu_energy_joules", "counter", "Energy used since the driver loaded",
           "nvmlDeviceGetTotalEnergyConsumption", lambda r: r.energy_j),
    Metric("gpu_temperature_celsius", "gauge", "GPU temperature", "nvmlDeviceGetTemperature(GPU)",
           lambda r: r.temperature_c),
    Metric("gpu_retired_pages", "gauge", "Retired memory pages (pre-Ampere)", "nvmlDeviceGetRetiredPages",
           lambda r: r.retired_pages),
    Metric("gpu_pcie_link_generation", "gauge", "Current PCIe generation",
           "nvmlDeviceGetCurrPcieLinkGeneration", lambda r: r.pcie_gen),
    Metric("gpu_pcie_link_generation_max", "gauge", "Highest PCIe generation of the card and slot",
           "nvmlDeviceGetMaxPcieLinkGeneration", lambda r: r.pcie_gen_max),
    Metric("gpu_pcie_link_width", "gauge", "Current PCIe lanes", "nvmlDeviceGetCurrPcieLinkWidth",
           lambda r: r.pcie_width),
    Metric("gpu_pcie_link_width_max", "gauge", "Most PCIe lanes", "nvmlDeviceGetMaxPcieLinkWidth",
           lambda r: r.pcie_width_max),
    Metric("gpu_pcie_transmit_bytes_per_second", "gauge", "PCIe transmit rate (NVML samples it over 20 ms)",
           "nvmlDeviceGetPcieThroughput(TX)", lambda r: r.pcie_tx_bytes_per_s),
    Metric("gpu_pcie_receive_bytes_per_second", "gauge", "PCIe receive rate (NVML samples it over 20 ms)",
           "nvmlDeviceGetPcieThroughput(RX)", lambda r: r.pcie_rx_bytes_per_s),
    Metric("gpu_mig_enabled", "gauge", "1 when MIG mode is on", "nvmlDeviceGetMigMode",
           lambda r: None if r.mig_enabled is None else float(r.mig_enabled)),
)  # fmt: skip
# Labelled families, filled below: (name, type, help, source, extra labels).
LABELLED: tuple[tuple[str, MetricType, str, str, tuple[str, ...]], ...] = (
    ("gpu_lost", "gauge", "1 when NVML reports the GPU lost (off the bus)", "NVML_ERROR_GPU_IS_LOST", ()),
    ("gpu_clock_event_reason", "gauge", "1 while this reason holds clocks down (throttling)",
     "nvmlDeviceGetCurrentClocksEventReasons", ("reason",)),
    ("gpu_ecc_errors", "counter", "ECC errors (volatile: since driver load; aggregate: lifetime)",
     "nvmlDeviceGetTotalEccErrors", ("counter", "type")),
    ("gpu_xid_errors", "counter", "XID critical errors since the exporter started", "nvmlEventSetWait_v2",
     ("xid",)),
    ("gpu_remapped_rows", "gauge", "Remapped memory rows (Ampere+)", "nvmlDeviceGetRemappedRows", ("kind",)),
    ("gpu_process_memory_used_bytes", "gauge", "GPU memory of a process (pid, user, name only)",
     "nvmlDeviceGetComputeRunningProcesses + psutil", ("pid", "user", "process")),
    ("gpu_process_sm_busy_ratio", "gauge", "Share of SM time this process's kernels ran (recent samples)",
     "nvmlDeviceGetProcessUtilization", ("pid", "user", "process")),
    ("gpu_kpi_breach", "gauge", "1 per KPI outside its band, with the finding that explains it",
     "gpuwise KPI checks", ("kpi", "finding")),
    ("gpu_price_usd_per_hour", "gauge", "Price of this GPU per hour (catalog or --usd-per-gpu-hour)",
     "gpuwise catalog", ()),
)  # fmt: skip


def _families(snapshot: Any, found: list[kpi.GpuVerdict]) -> Iterator[Any]:
    """Every metric family of one scrape: the per-GPU gauges of METRICS, then the LABELLED families
    (one sample per GPU and label value), each family once with all GPUs in it."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    def family(name: str, kind: MetricType, text: str, extra: tuple[str, ...] = ()) -> Any:
        cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        return cls(f"gpuwise_{name}", text, labels=[*LABELS, *extra])

    base = {r.index: [str(r.index), r.uuid or "", r.name, snapshot.hostname] for r in snapshot.gpus}
    for metric in METRICS:
        fam = family(metric.name, metric.type, metric.help)
        for r in snapshot.gpus:
            value = metric.value(r)
            if value is not None:
                fam.add_metric(base[r.index], float(value))
        yield fam
    labelled = _Labelled(*(family(n, k, h, x) for n, k, h, _, x in LABELLED))
    for r, verdict in zip(snapshot.gpus, found, strict=True):
        labelled.add_gpu(base[r.index], r, verdict)
    yield from labelled


@dataclass
class _Labelled:
    """The LABELLED families of one scrape, in LABELLED's order, filled GPU by GPU."""

    lost: Any
    reasons: Any
    ecc: Any
    xids: Any
    rows: Any
    procs: Any
    sm: Any
    breach: Any
    price: Any

    def __iter__(self) -> Iterator[Any]:
        return iter(
            (
                self.lost,
                self.reasons,
                self.ecc,
                self.xids,
                self.rows,
                self.procs,
                self.sm,
                self.breach,
                self.price,
            )
        )

    def add_gpu(self, labels: list[str], r: GpuReading, verdict: kpi.GpuVerdict) -> None:
        """One GPU's samples in every labelled family (a field NVML could not read is left out)."""
        self.lost.add_metric(labels, float(r.lost))
        if r.throttle_reasons is not None:
            for reason in REASON_BITS.values():
                self.reasons.add_metric([*labels, reason], float(reason in r.throttle_reasons))
        self._add_memory_health(labels, r)
        for p in r.processes or []:
            who = [*labels, str(p.pid), p.user or "", p.name or ""]
            if p.gpu_memory_bytes is not None:
                self.procs.add_metric(who, float(p.gpu_memory_bytes))
            if p.sm_pct is not None:
                self.sm.add_metric(who, p.sm_pct / 100.0)
        for b in verdict.breaches:
            self.breach.add_metric([*labels, b.kpi, b.finding_id], 1.0)
        if verdict.usd_per_hour is not None:
            self.price.add_metric(labels, verdict.usd_per_hour)

    def _add_memory_health(self, labels: list[str], r: GpuReading) -> None:
        """ECC error counters, XID errors by code, remapped rows."""
        for counter in ("volatile", "aggregate"):
            for kind in ("corrected", "uncorrected"):
                value = getattr(r, f"ecc_{counter}_{kind}")
                if value is not None:
                    self.ecc.add_metric([*labels, counter, kind], float(value))
        for xid in sorted(set(r.xid_errors or [])):
            self.xids.add_metric([*labels, str(xid)], float((r.xid_errors or []).count(xid)))
        for kind in ("correctable", "uncorrectable"):
            value = getattr(r, f"remapped_rows_{kind}")
            if value is not None:
                self.rows.add_metric([*labels, kind], float(value))


class GpuCollector:
    """A prometheus_client collector that samples every GPU at each scrape."""

    def __init__(self, sampler: GpuSampler, usd_per_gpu_hour: float | None = None) -> None:
        self.sampler = sampler
        self.usd_per_gpu_hour = usd_per_gpu_hour

    def collect(self) -> Iterator[Any]:
        """Sample every GPU now and yield the metric families, KPI verdicts and cost included."""
        snapshot = self.sampler.sample()
        found = kpi.verdicts(snapshot, self.usd_per_gpu_hour)
        kpi.cost(snapshot, found, self.usd_per_gpu_hour)
        yield from _families(snapshot, found)


def parse_listen(listen: str) -> tuple[str, int]:
    """'127.0.0.1:9835', '[::1]:9835' or ':9835' (all interfaces) -> (address, port)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise GpuwiseError(f"--listen {listen!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (a loopback address or ``localhost``), so exposing the
    endpoint without TLS or auth needs no warning.
    """
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def start(
    sampler: GpuSampler,
    listen: str = DEFAULT_LISTEN,
    usd_per_gpu_hour: float | None = None,
    config: WebConfig | None = None,
    **limits: float,
) -> Any:
    """Serve /metrics on a daemon thread, with the web config's TLS and basic auth (``limits``: the worker
    pool and timeouts of exporter/http_server.py); returns the server (``server_port``, ``shutdown()``)."""
    try:
        from prometheus_client import make_wsgi_app
        from prometheus_client.registry import CollectorRegistry
    except ImportError:
        raise GpuwiseError("the exporter needs prometheus_client: pip install 'gpuwise[monitor]'") from None
    host, port = parse_listen(listen)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(sampler, usd_per_gpu_hour))
    try:
        return serve(make_wsgi_app(registry), host, port, config or WebConfig(), **limits)
    except OSError as err:
        raise GpuwiseError(f"cannot listen on {listen}: {err.strerror or err}") from None


__all__ = [
    "DEFAULT_LISTEN",
    "LABELLED",
    "LABELS",
    "METRICS",
    "GpuCollector",
    "Metric",
    "MetricType",
    "is_loopback",
    "parse_listen",
    "start",
]
