"""The three GPU exporters whose metrics `load_history` reads, as data: metric -> GpuSample field.

Names, units and labels as each exporter publishes them (sources in docs/monitoring.md):
- gpuwise's own exporter (`exporter/scrape.py`): base units, throttle reasons as a 0/1 gauge per reason;
- NVIDIA dcgm-exporter (etc/default-counters.csv, etc/dcp-metrics-included.csv): MiB, W, mJ, %,
  profiling ratios 0-1, clock-event reasons as NVML's bitmask;
- nvitop-exporter (nvitop_exporter/exporter.py): prometheus_client gauges whose unit is appended to the
  name (`gpu_utilization_Percentage`, `gpu_memory_used_MiB`), no energy, no clock reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuwise.units import MiB

Field = Literal[
    "busy_pct", "sm_active_pct", "memory_used_bytes", "memory_total_bytes", "power_w", "energy_j",
    "temperature_c", "lost",
]  # fmt: skip
ProcessField = Literal["gpu_memory_bytes", "sm_pct"]
# How a gauge becomes one value per step: the mean over the step, the last value (counters), the highest.
Reduce = Literal["avg", "last", "max"]
DialectName = Literal["gpuwise", "dcgm", "nvitop"]


@dataclass(frozen=True)
class Source:
    """One metric feeding one field: value × scale (+ the values of ``plus``, e.g. used + free = total)."""

    metric: str
    scale: float = 1.0
    reduce: Reduce = "avg"
    plus: tuple[str, ...] = ()
    unit: str = ""  # the metric's unit when it is not the field's (shown in the sources)


@dataclass(frozen=True)
class Dialect:
    """How one exporter publishes what ``GpuSample`` needs: the metric that identifies it, its labels for
    host, GPU index, UUID and name, and the sources of each field and process field (first present wins).

    GPU throttle reasons come either as a 0/1 gauge with a ``reason`` label (``reasons_metric``) or as
    NVML's clock-event bitmask (``reasons_bitmask``).
    """

    name: DialectName
    exporter: str  # as the sources say it
    detect: str  # the metric whose presence says this exporter is scraped
    host_labels: tuple[str, ...]  # first present wins; Prometheus' own `instance` is the last resort
    gpu_label: str
    uuid_label: str
    name_label: str
    fields: dict[Field, tuple[Source, ...]]  # first metric present wins
    reasons_metric: str | None = None  # 0/1 gauge with a `reason` label (gpuwise)
    reasons_bitmask: tuple[str, ...] = ()  # NVML clock-event reason bitmask metrics (dcgm), first present
    process_fields: dict[ProcessField, Source] | None = None
    pid_label: str = "pid"
    user_label: str = "user"
    process_label: str | None = None


GPUWISE = Dialect(
    name="gpuwise",
    exporter="gpuwise exporter",
    detect="gpuwise_gpu_busy_ratio",
    host_labels=("hostname",),
    gpu_label="gpu",
    uuid_label="uuid",
    name_label="name",
    fields={
        "busy_pct": (Source("gpuwise_gpu_busy_ratio", 100.0, unit="ratio"),),
        "memory_used_bytes": (Source("gpuwise_gpu_memory_used_bytes"),),
        "memory_total_bytes": (Source("gpuwise_gpu_memory_total_bytes", reduce="last"),),
        "power_w": (Source("gpuwise_gpu_power_watts"),),
        "energy_j": (Source("gpuwise_gpu_energy_joules_total", reduce="last"),),
        "temperature_c": (Source("gpuwise_gpu_temperature_celsius"),),
        "lost": (Source("gpuwise_gpu_lost", reduce="max"),),
    },
    reasons_metric="gpuwise_gpu_clock_event_reason",
    process_fields={
        "gpu_memory_bytes": Source("gpuwise_gpu_process_memory_used_bytes"),
        "sm_pct": Source("gpuwise_gpu_process_sm_busy_ratio", 100.0, unit="ratio"),
    },
    process_label="process",
)

DCGM = Dialect(
    name="dcgm",
    exporter="dcgm-exporter",
    detect="DCGM_FI_DEV_FB_USED",
    host_labels=("Hostname", "hostname"),
    gpu_label="gpu",
    uuid_label="UUID",
    name_label="modelName",
    fields={
        "busy_pct": (
            Source("DCGM_FI_DEV_GPU_UTIL"),
            Source("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 100.0, unit="ratio"),
        ),
        "sm_active_pct": (Source("DCGM_FI_PROF_SM_ACTIVE", 100.0, unit="ratio"),),
        "memory_used_bytes": (Source("DCGM_FI_DEV_FB_USED", MiB, unit="MiB"),),
        "memory_total_bytes": (
            Source(
                "DCGM_FI_DEV_FB_USED", MiB, "last", ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED"), "MiB"
            ),
        ),
        "power_w": (Source("DCGM_FI_DEV_POWER_USAGE"),),
        "energy_j": (Source("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3, "last", unit="mJ"),),
        "temperature_c": (Source("DCGM_FI_DEV_GPU_TEMP"),),
    },
    reasons_bitmask=("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
)

NVITOP = Dialect(
    name="nvitop",
    exporter="nvitop-exporter",
    detect="gpu_utilization_Percentage",
    host_labels=("hostname",),
    gpu_label="index",
    uuid_label="uuid",
    name_label="devicename",
    fields={
        "busy_pct": (Source("gpu_utilization_Percentage"),),
        "memory_used_bytes": (Source("gpu_memory_used_MiB", MiB, unit="MiB"),),
        "memory_total_bytes": (Source("gpu_memory_total_MiB", MiB, "last", unit="MiB"),),
        "power_w": (Source("gpu_power_usage_W"),),
        "temperature_c": (Source("gpu_temperature_C"),),
    },
    process_fields={
        "gpu_memory_bytes": Source("process_gpu_memory_MiB", MiB, unit="MiB"),
        "sm_pct": Source("process_gpu_sm_utilization_Percentage"),
    },
    user_label="username",
)

DIALECTS: tuple[Dialect, ...] = (GPUWISE, DCGM, NVITOP)  # a GPU seen by two exporters: the first wins


__all__ = ["DIALECTS", "Dialect", "DialectName", "Field", "ProcessField", "Reduce", "Source"]
