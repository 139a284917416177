"""`gpuwise exporter --names dcgm`: NVIDIA dcgm-exporter's metric names, units and labels.

Why: operators already run dcgm-exporter's Grafana dashboards and alerts; with these names the same
queries resolve against gpuwise. Names, units and help texts follow dcgm-exporter's
``etc/default-counters.csv`` and ``etc/dcp-metrics-included.csv`` (DCGM_FI_DEV_* fields: % for
utilisation, MiB for framebuffer memory, MHz for clocks, W for power, mJ for energy, C for temperature);
labels are dcgm-exporter's (gpu, UUID, device, modelName, Hostname). Each field names the native
``gpuwise_`` metric that carries the same reading (docs/monitoring.md prints the table). DCGM profiling
fields (DCGM_FI_PROF_*) need DCGM's profiler and have no NVML equivalent: they are not served.

dcgm-exporter's counters carry no ``_total``; prometheus_client would append one to a counter family, so
they are served untyped (``# TYPE ... untyped``), which PromQL treats the same (``rate`` works).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gpuwise.monitor.nvml_sample import REASON_BITS
from gpuwise.monitor.reading import GpuReading

__all__ = ["DCGM_FIELDS", "DCGM_LABELS", "MIB", "DcgmField", "Naming", "clock_event_mask", "fb_used_mib"]

Naming = Literal["gpuwise", "dcgm"]
DCGM_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")
MIB = 1024 * 1024  # DCGM's framebuffer figures are MiB


@dataclass(frozen=True)
class DcgmField:
    """One dcgm-exporter metric: its name, dcgm-exporter's type and help text (unit in brackets), the
    native gpuwise metric (with label values) carrying the same reading, and the value in DCGM's unit."""

    name: str
    type: Literal["gauge", "counter"]
    help: str
    native: str  # the gpuwise_ sample it equals, in its own unit (docs/monitoring.md's mapping)
    value: Callable[[GpuReading], float | None]


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def fb_used_mib(r: GpuReading) -> float | None:
    """Framebuffer used in MiB as DCGM counts it (total − free − reserved, NVML v2), else NVML v1's used."""
    if r.memory_total_bytes is not None and r.memory_free_bytes is not None:
        return (r.memory_total_bytes - r.memory_free_bytes - (r.memory_reserved_bytes or 0)) / MIB
    return _scaled(r.memory_used_bytes, 1 / MIB)


def clock_event_mask(r: GpuReading) -> float | None:
    """The clock-event reasons as NVML's bitmask (DCGM_FI_DEV_CLOCKS_EVENT_REASONS)."""
    if r.throttle_reasons is None:
        return None
    return float(sum(bit for bit, name in REASON_BITS.items() if name in r.throttle_reasons))


def _last_xid(r: GpuReading) -> float | None:
    return None if r.xid_errors is None else float(r.xid_errors[-1] if r.xid_errors else 0)


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


_ECC = "gpuwise_gpu_ecc_errors_total{{counter={0},type={1}}}"
DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "gpuwise_gpu_sm_clock_hertz",
              lambda r: r.sm_clock_mhz),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
              "gpuwise_gpu_memory_clock_hertz", lambda r: r.memory_clock_mhz),
    DcgmField("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).",
              "gpuwise_gpu_memory_temperature_celsius", lambda r: r.memory_temperature_c),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "gpuwise_gpu_temperature_celsius",
              lambda r: r.temperature_c),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "gpuwise_gpu_power_watts",
              lambda r: r.power_w),
    DcgmField("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Effective power limit (in W).",
              "gpuwise_gpu_power_limit_watts", lambda r: r.power_limit_w),
    DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
              "Total energy consumption since boot (in mJ).", "gpuwise_gpu_energy_joules_total",
              lambda r: _scaled(r.energy_j, 1000.0)),
    DcgmField("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
              "gpuwise_gpu_pcie_replays_total", lambda r: r.pcie_replays),
    DcgmField("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation.",
              "gpuwise_gpu_pcie_link_generation", lambda r: r.pcie_gen),
    DcgmField("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe link width (lanes).",
              "gpuwise_gpu_pcie_link_width", lambda r: r.pcie_width),
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "gpuwise_gpu_busy_ratio",
              lambda r: r.busy_pct),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
              "gpuwise_gpu_memory_busy_ratio", lambda r: r.memory_busy_pct),
    DcgmField("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).",
              "gpuwise_gpu_encoder_busy_ratio", lambda r: r.encoder_busy_pct),
    DcgmField("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).",
              "gpuwise_gpu_decoder_busy_ratio", lambda r: r.decoder_busy_pct),
    DcgmField("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
              "gpuwise_gpu_xid_errors_total{xid}", _last_xid),
    DcgmField("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).",
              "gpuwise_gpu_clock_event_reason{reason}", clock_event_mask),
    DcgmField("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).",
              "gpuwise_gpu_memory_total_bytes", lambda r: _scaled(r.memory_total_bytes, 1 / MIB)),
    DcgmField("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
              "gpuwise_gpu_memory_free_bytes", lambda r: _scaled(r.memory_free_bytes, 1 / MIB)),
    DcgmField("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
              "gpuwise_gpu_memory_used_bytes - gpuwise_gpu_memory_reserved_bytes", fb_used_mib),
    DcgmField("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).",
              "gpuwise_gpu_memory_reserved_bytes", lambda r: _scaled(r.memory_reserved_bytes, 1 / MIB)),
    DcgmField("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
              _ECC.format("volatile", "corrected"), lambda r: r.ecc_volatile_corrected),
    DcgmField("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
              _ECC.format("volatile", "uncorrected"), lambda r: r.ecc_volatile_uncorrected),
    DcgmField("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors.",
              _ECC.format("aggregate", "corrected"), lambda r: r.ecc_aggregate_corrected),
    DcgmField("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors.",
              _ECC.format("aggregate", "uncorrected"), lambda r: r.ecc_aggregate_uncorrected),
    DcgmField("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
              "Number of remapped rows for uncorrectable errors",
              "gpuwise_gpu_remapped_rows{kind=uncorrectable}", lambda r: r.remapped_rows_uncorrectable),
    DcgmField("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
              "Number of remapped rows for correctable errors",
              "gpuwise_gpu_remapped_rows{kind=correctable}", lambda r: r.remapped_rows_correctable),
    DcgmField("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed",
              "gpuwise_gpu_remap_failed", lambda r: _flag(r.remap_failed)),
)  # fmt: skip
