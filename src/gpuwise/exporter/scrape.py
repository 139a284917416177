"""`gpuwise exporter`: the monitor's readings as a Prometheus endpoint (prometheus_client).

Prometheus naming: the `gpuwise_` prefix, base units (bytes, watts, joules, celsius, hertz, ratios 0-1),
`_total` on counters; labels gpu (index), uuid, name, hostname. The GPUs are read when Prometheus scrapes,
so a reading is never older than the scrape. A field NVML cannot read is left out (Prometheus' way of
saying n/a). Processes carry pid, user and process name only: command lines and environments hold secrets;
only the ``top_processes`` largest by GPU memory get their own pid series on each GPU, the rest are summed
into pid="other" (so the pid label cannot grow without bound as jobs come and go).
``naming="dcgm"`` serves dcgm-exporter's names, units and labels instead (exporter/dcgm_names.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from gpuwise.errors import GpuwiseError
from gpuwise.exporter.dcgm_names import DCGM_FIELDS, DCGM_LABELS, Naming
from gpuwise.exporter.web_config import WebConfig, serve
from gpuwise.monitor import kpi
from gpuwise.monitor.nvml_sample import REASON_BITS
from gpuwise.monitor.reading import GpuProcess, GpuReading
from gpuwise.monitor.sampler import GpuSampler

DEFAULT_LISTEN = "127.0.0.1:9835"
DEFAULT_TOP_PROCESSES = 5  # pid series per GPU; the rest are summed into pid="other"
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
    Metric("gpu_memory_reserved_bytes", "gauge", "Device memory the driver reserves (in no process's use)",
           "nvmlDeviceGetMemoryInfo(v2).reserved", lambda r: r.memory_reserved_bytes),
    Metric("gpu_memory_free_bytes", "gauge", "Device memory free", "nvmlDeviceGetMemoryInfo(v2).free",
           lambda r: r.memory_free_bytes),
    Metric("gpu_memory_temperature_celsius", "gauge", "Memory (HBM) temperature",
           "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)", lambda r: r.memory_temperature_c),
    Metric("gpu_pcie_replays", "counter", "PCIe replays (link-level retries) since the driver loaded",
           "nvmlDeviceGetPcieReplayCounter", lambda r: r.pcie_replays),
    Metric("gpu_encoder_busy_ratio", "gauge", "Share of the last period the video encoder was busy",
           "nvmlDeviceGetEncoderUtilization", lambda r: _ratio(r.encoder_busy_pct)),
    Metric("gpu_decoder_busy_ratio", "gauge", "Share of the last period the video decoder was busy",
           "nvmlDeviceGetDecoderUtilization", lambda r: _ratio(r.decoder_busy_pct)),
    Metric("gpu_remap_failed", "gauge", "1 when a memory row remap failed (Ampere+)",
           "nvmlDeviceGetRemappedRows", lambda r: None if r.remap_failed is None else float(r.remap_failed)),
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
    ("gpu_process_memory_used_bytes", "gauge",
     "GPU memory of a process (pid, user, name only; the smaller ones summed as pid=other)",
     "nvmlDeviceGetComputeRunningProcesses + psutil", ("pid", "user", "process")),
    ("gpu_process_sm_busy_ratio", "gauge", "Share of SM time this process's kernels ran (recent samples)",
     "nvmlDeviceGetProcessUtilization", ("pid", "user", "process")),
    ("gpu_kpi_breach", "gauge", "1 per KPI outside its band, with the finding that explains it",
     "gpuwise KPI checks", ("kpi", "finding")),
    ("gpu_price_usd_per_hour", "gauge", "Price of this GPU per hour (catalog or --usd-per-gpu-hour)",
     "gpuwise catalog", ()),
)  # fmt: skip


def _full_name(name: str, kind: MetricType) -> str:
    return f"gpuwise_{name}" + ("_total" if kind == "counter" else "")


# Native families a dcgm field replaces under --names dcgm (their readings are served under DCGM's name).
DCGM_COVERED = {f.native for f in DCGM_FIELDS} | {"gpuwise_gpu_ecc_errors", "gpuwise_gpu_remapped_rows"}


def _families(
    snapshot: Any,
    found: list[kpi.GpuVerdict],
    naming: Naming = "gpuwise",
    top_processes: int = DEFAULT_TOP_PROCESSES,
) -> Iterator[Any]:
    """Every metric family of one scrape: the per-GPU gauges of METRICS, then the LABELLED families
    (one sample per GPU and label value), each family once with all GPUs in it. ``naming="dcgm"``: the
    DCGM fields first, then the gpuwise metrics no DCGM field covers, all with dcgm-exporter's labels."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    dcgm = naming == "dcgm"
    names = list(DCGM_LABELS if dcgm else LABELS)

    def family(name: str, kind: MetricType, text: str, extra: tuple[str, ...] = ()) -> Any:
        cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        return cls(f"gpuwise_{name}", text, labels=[*names, *extra])

    def labels(r: GpuReading) -> list[str]:
        if dcgm:
            return [str(r.index), r.uuid or "", f"nvidia{r.index}", r.name, snapshot.hostname]
        return [str(r.index), r.uuid or "", r.name, snapshot.hostname]

    base = {r.index: labels(r) for r in snapshot.gpus}
    if dcgm:
        yield from _dcgm_families(snapshot.gpus, base)
    for metric in METRICS:
        if dcgm and _full_name(metric.name, metric.type) in DCGM_COVERED:
            continue
        fam = family(metric.name, metric.type, metric.help)
        for r in snapshot.gpus:
            value = metric.value(r)
            if value is not None:
                fam.add_metric(base[r.index], float(value))
        yield fam
    labelled = _Labelled(*(family(n, k, h, x) for n, k, h, _, x in LABELLED))
    labelled.top_processes = top_processes
    for r, verdict in zip(snapshot.gpus, found, strict=True):
        labelled.add_gpu(base[r.index], r, verdict)
    yield from (f for f in labelled if not (dcgm and f.name in DCGM_COVERED))


def _dcgm_families(gpus: list[GpuReading], base: dict[int, list[str]]) -> Iterator[Any]:
    """The DCGM_FI_* families (counters untyped: dcgm-exporter's names carry no ``_total``)."""
    from prometheus_client.core import Metric

    for field in DCGM_FIELDS:
        fam = Metric(field.name, field.help, "gauge" if field.type == "gauge" else "unknown")
        for r in gpus:
            value = field.value(r)
            if value is not None:
                fam.add_sample(field.name, dict(zip(DCGM_LABELS, base[r.index], strict=True)), float(value))
        yield fam


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
    top_processes: int = DEFAULT_TOP_PROCESSES

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
        self._add_processes(labels, r.processes or [])
        for b in verdict.breaches:
            self.breach.add_metric([*labels, b.kpi, b.finding_id], 1.0)
        if verdict.usd_per_hour is not None:
            self.price.add_metric(labels, verdict.usd_per_hour)

    def _add_processes(self, labels: list[str], procs: list[GpuProcess]) -> None:
        """The ``top_processes`` largest by GPU memory with their pid; the rest summed into pid="other"."""
        ranked = sorted(procs, key=lambda p: -(p.gpu_memory_bytes or 0))
        for p in ranked[: self.top_processes]:
            who = [*labels, str(p.pid), p.user or "", p.name or ""]
            if p.gpu_memory_bytes is not None:
                self.procs.add_metric(who, float(p.gpu_memory_bytes))
            if p.sm_pct is not None:
                self.sm.add_metric(who, p.sm_pct / 100.0)
        rest = ranked[self.top_processes :]
        if rest:
            other = [*labels, "other", "", "other"]
            self.procs.add_metric(other, float(sum(p.gpu_memory_bytes or 0 for p in rest)))
            shares = [p.sm_pct for p in rest if p.sm_pct is not None]
            if shares:
                self.sm.add_metric(other, sum(shares) / 100.0)

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

    def __init__(
        self,
        sampler: GpuSampler,
        usd_per_gpu_hour: float | None = None,
        naming: Naming = "gpuwise",
        top_processes: int = DEFAULT_TOP_PROCESSES,
    ) -> None:
        self.sampler = sampler
        self.usd_per_gpu_hour = usd_per_gpu_hour
        self.naming: Naming = naming
        self.top_processes = top_processes

    def collect(self) -> Iterator[Any]:
        """Sample every GPU now and yield the metric families, KPI verdicts and cost included."""
        snapshot = self.sampler.sample()
        found = kpi.verdicts(snapshot, self.usd_per_gpu_hour)
        kpi.cost(snapshot, found, self.usd_per_gpu_hour)
        yield from _families(snapshot, found, self.naming, self.top_processes)


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
    naming: Naming = "gpuwise",
    top_processes: int = DEFAULT_TOP_PROCESSES,
    **limits: float,
) -> Any:
    """Serve /metrics on a daemon thread, with the web config's TLS and basic auth (``limits``: the worker
    pool and timeouts of exporter/http_server.py), under gpuwise's or dcgm-exporter's names (``naming``),
    ``top_processes`` pid series per GPU; returns the server (``server_port``, ``shutdown()``)."""
    try:
        from prometheus_client import make_wsgi_app
        from prometheus_client.registry import CollectorRegistry
    except ImportError:
        raise GpuwiseError("the exporter needs prometheus_client: pip install 'gpuwise[monitor]'") from None
    host, port = parse_listen(listen)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuCollector(sampler, usd_per_gpu_hour, naming, top_processes))
    try:
        return serve(make_wsgi_app(registry), host, port, config or WebConfig(), **limits)
    except OSError as err:
        raise GpuwiseError(f"cannot listen on {listen}: {err.strerror or err}") from None


__all__ = [
    "DCGM_COVERED",
    "DEFAULT_LISTEN",
    "DEFAULT_TOP_PROCESSES",
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
