"""What one sample of one GPU says: every field None when NVML cannot tell ("n/a" in views).

Units are in the field names. ``busy_pct`` is NVML's ``utilization.gpu``: the share of the last sample
period in which one or more kernels ran, not how many SMs they kept busy (an upper bound on SM activity).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpuwise.monitor.nvml_sample import FieldReader, clock_reasons, decode_reasons, memory_info, text

KIB = 1024  # nvmlDeviceGetPcieThroughput returns KB/s (nvml.h); NVML's KB are 1024 bytes


@dataclass
class GpuProcess:
    """A process using the GPU: pid, user and process name only (never its command line or environment)."""

    pid: int
    user: str | None = None
    name: str | None = None
    gpu_memory_bytes: int | None = None
    sm_pct: float | None = None  # share of the SMs' time this process's kernels ran (NVML's recent samples)


@dataclass
class GpuReading:
    """Everything one sample reads of one GPU; units in the field names, None where NVML cannot tell (the
    reason in ``not_available``). A lost GPU has ``lost`` set and every other field None.
    """

    index: int
    name: str = ""
    uuid: str | None = None
    lost: bool = False  # NVML_ERROR_GPU_IS_LOST: fell off the bus; every other field is None
    busy_pct: float | None = None
    memory_busy_pct: float | None = None  # share of time device memory was read or written
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_reserved_bytes: int | None = None  # the driver's reservation (NVML v2 call; None: v1 only)
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    memory_clock_mhz: float | None = None
    memory_clock_max_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None  # since the driver was loaded
    temperature_c: float | None = None
    throttle_reasons: list[str] | None = None
    ecc_volatile_corrected: int | None = None  # since the driver was loaded
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None  # over the GPU's life
    ecc_aggregate_uncorrected: int | None = None
    retired_pages: int | None = None  # pre-Ampere page retirement (both causes)
    remapped_rows_correctable: int | None = None  # Ampere+ row remapping
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None  # a remap waits for a GPU reset
    remap_failed: bool | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None  # PCIe replay counter since the driver loaded (link retransmissions)
    pcie_replays_per_min: float | None = None  # its rate since the sampler's first reading (>= 60 s)
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    mig_enabled: bool | None = None
    xid_errors: list[int] | None = None  # XID codes reported since the sampler started (NVML events)
    processes: list[GpuProcess] | None = None
    # what dcgm-exporter's default counters also export (read by _exporter_fields)
    memory_free_bytes: int | None = None  # total - used - reserved (NVML v2 memory info)
    memory_temperature_c: float | None = None  # HBM temperature (field NVML_FI_DEV_MEMORY_TEMP)
    encoder_busy_pct: float | None = None  # share of the encoder's sample period it was busy
    decoder_busy_pct: float | None = None
    not_available: dict[str, str] = field(default_factory=dict)

    @property
    def headroom_pct(self) -> float | None:
        """Free device memory as a % of the total; None when either figure is unknown."""
        if not self.memory_total_bytes or self.memory_used_bytes is None:
            return None
        return 100.0 * (1 - self.memory_used_bytes / self.memory_total_bytes)

    def to_dict(self) -> dict[str, Any]:
        """The reading as JSON, with ``memory_headroom_pct``."""
        return {**asdict(self), "memory_headroom_pct": self.headroom_pct}


@dataclass
class HostReading:
    """The host's CPU busy % and memory in bytes (from psutil); None where it cannot be read."""

    cpu_pct: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None


def read_host() -> HostReading:
    """Host CPU and memory (psutil), so `--host` shows something on a machine without a GPU."""
    try:
        import psutil
    except ImportError:
        return HostReading()
    mem = psutil.virtual_memory()
    # The first call of a process has no previous reading to compare with: measure over 0.1 s instead.
    first = not _host_primed
    _host_primed.append(True)
    cpu = psutil.cpu_percent(interval=0.1 if first else None)
    return HostReading(cpu, int(mem.total - mem.available), int(mem.total))


_host_primed: list[bool] = []


def read_gpu(nv: Any, handle: Any, reading: GpuReading, fields: FieldReader) -> GpuReading:
    """Fill ``reading`` from NVML; raises `GpuLost` (the caller marks the reading lost)."""
    read = fields.read
    util = read("busy", lambda: nv.nvmlDeviceGetUtilizationRates(handle))
    if util is not None:
        reading.busy_pct, reading.memory_busy_pct = float(util.gpu), float(util.memory)
    mem, v2 = memory_info(nv, handle, read)
    fields.not_available.pop("memory_v2", None)  # v1 answered instead: not a missing field
    if mem is not None:
        reading.memory_used_bytes, reading.memory_total_bytes = int(mem.used), int(mem.total)
        reading.memory_reserved_bytes = int(mem.reserved) if v2 else None
        reading.memory_free_bytes = int(mem.free)
    _clocks(nv, handle, reading, read)
    _power(nv, handle, reading, read)
    mask = read("throttle_reasons", lambda: clock_reasons(nv, handle))
    reading.throttle_reasons = None if mask is None else decode_reasons(int(mask))
    _errors(nv, handle, reading, read)
    _pcie(nv, handle, reading, read)
    mig = read("mig", lambda: nv.nvmlDeviceGetMigMode(handle))
    reading.mig_enabled = None if mig is None else bool(mig[0] == nv.NVML_DEVICE_MIG_ENABLE)
    reading.processes = read("processes", lambda: _processes(nv, handle))
    _exporter_fields(nv, handle, reading, read)
    reading.not_available = dict(fields.not_available)
    return reading


def _clocks(nv: Any, h: Any, r: GpuReading, read: Any) -> None:
    def mhz(field: str, fn: Any) -> float | None:
        value = read(field, fn)
        return None if value is None else float(value)

    r.sm_clock_mhz = mhz("sm_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
    r.sm_clock_max_mhz = mhz("sm_clock_max", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))
    r.memory_clock_mhz = mhz("memory_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))
    r.memory_clock_max_mhz = mhz(
        "memory_clock_max", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)
    )


def _power(nv: Any, h: Any, r: GpuReading, read: Any) -> None:
    power = read("power", lambda: nv.nvmlDeviceGetPowerUsage(h))
    r.power_w = None if power is None else power / 1000.0  # milliwatts
    limit = read("power_limit", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
    r.power_limit_w = None if limit is None else limit / 1000.0
    energy = read("energy", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
    r.energy_j = None if energy is None else energy / 1000.0  # millijoules
    temp = read("temperature", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
    r.temperature_c = None if temp is None else float(temp)


def _errors(nv: Any, h: Any, r: GpuReading, read: Any) -> None:
    def ecc(kind: int, counter: int) -> int | None:
        name = "ecc_volatile" if counter == nv.NVML_VOLATILE_ECC else "ecc_aggregate"
        value = read(name, lambda: nv.nvmlDeviceGetTotalEccErrors(h, kind, counter))
        return None if value is None else int(value)

    corrected, uncorrected = nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    r.ecc_volatile_corrected = ecc(corrected, nv.NVML_VOLATILE_ECC)
    r.ecc_volatile_uncorrected = ecc(uncorrected, nv.NVML_VOLATILE_ECC)
    r.ecc_aggregate_corrected = ecc(corrected, nv.NVML_AGGREGATE_ECC)
    r.ecc_aggregate_uncorrected = ecc(uncorrected, nv.NVML_AGGREGATE_ECC)
    pages = read(
        "retired_pages",
        lambda: sum(
            len(nv.nvmlDeviceGetRetiredPages(h, cause))
            for cause in (
                nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
            )
        ),
    )
    r.retired_pages = pages
    rows = read("remapped_rows", lambda: nv.nvmlDeviceGetRemappedRows(h))
    if rows is not None:
        r.remapped_rows_correctable, r.remapped_rows_uncorrectable = int(rows[0]), int(rows[1])
        r.remap_pending, r.remap_failed = bool(rows[2]), bool(rows[3])


def _pcie(nv: Any, h: Any, r: GpuReading, read: Any) -> None:
    r.pcie_gen = read("pcie_gen", lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h))
    r.pcie_gen_max = read("pcie_gen_max", lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h))
    r.pcie_width = read("pcie_width", lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h))
    r.pcie_width_max = read("pcie_width_max", lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h))
    replays = read("pcie_replays", lambda: nv.nvmlDeviceGetPcieReplayCounter(h))
    r.pcie_replays = None if replays is None else int(replays)
    tx = read("pcie_throughput", lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES))
    rx = read("pcie_throughput", lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES))
    r.pcie_tx_bytes_per_s = None if tx is None else float(tx) * KIB
    r.pcie_rx_bytes_per_s = None if rx is None else float(rx) * KIB


def _exporter_fields(nv: Any, h: Any, r: GpuReading, read: Any) -> None:
    """Memory temperature, PCIe replays, encoder and decoder busy %: what dcgm-exporter's default
    counters export beyond the fields above (reserved and free memory come with ``memory_info``)."""
    temp = read("memory_temperature", lambda: _field_value(nv, h, nv.NVML_FI_DEV_MEMORY_TEMP))
    r.memory_temperature_c = None if temp is None else float(temp)
    if r.pcie_replays is None:  # unless the PCIe reads above took it already
        r.pcie_replays = read("pcie_replays", lambda: int(nv.nvmlDeviceGetPcieReplayCounter(h)))
    enc = read("encoder", lambda: nv.nvmlDeviceGetEncoderUtilization(h))
    r.encoder_busy_pct = None if enc is None else float(enc[0])  # [busy %, sampling period µs]
    dec = read("decoder", lambda: nv.nvmlDeviceGetDecoderUtilization(h))
    r.decoder_busy_pct = None if dec is None else float(dec[0])


def _field_value(nv: Any, h: Any, field_id: int) -> float:
    """One NVML field value as a number; raises the field's own NVML error (not supported, ...)."""
    value = nv.nvmlDeviceGetFieldValues(h, [field_id])[0]
    if value.nvmlReturn != nv.NVML_SUCCESS:
        raise nv.NVMLError(value.nvmlReturn)
    kinds = {
        nv.NVML_VALUE_TYPE_DOUBLE: "dVal",
        nv.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        nv.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        nv.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        nv.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    }
    return float(getattr(value.value, kinds.get(value.valueType, "uiVal")))


def _processes(nv: Any, h: Any) -> list[GpuProcess]:
    """Compute and graphics processes, each pid once; user and name from psutil where it can see them."""
    seen: dict[int, GpuProcess] = {}
    for getter in (nv.nvmlDeviceGetComputeRunningProcesses, nv.nvmlDeviceGetGraphicsRunningProcesses):
        for proc in getter(h):
            used = getattr(proc, "usedGpuMemory", None)
            seen.setdefault(int(proc.pid), GpuProcess(int(proc.pid), gpu_memory_bytes=used))
    sm = _sm_shares(nv, h) if seen else {}
    for proc in seen.values():
        proc.user, proc.name = _owner(proc.pid)
        proc.sm_pct = sm.get(proc.pid)
    return sorted(seen.values(), key=lambda p: -(p.gpu_memory_bytes or 0))


def _sm_shares(nv: Any, h: Any) -> dict[int, float]:
    """pid -> SM share of its latest sample in NVML's buffer; {} where the GPU or driver has none (no
    sample yet is an error code too, so any error here means "n/a", never a disabled field)."""
    try:
        samples = nv.nvmlDeviceGetProcessUtilization(h, 0)
    except Exception:
        return {}
    latest: dict[int, tuple[int, float]] = {}
    for s in samples:
        if s.pid not in latest or s.timeStamp > latest[s.pid][0]:
            latest[int(s.pid)] = (int(s.timeStamp), float(s.smUtil))
    return {pid: share for pid, (_, share) in latest.items()}


def _owner(pid: int) -> tuple[str | None, str | None]:
    try:
        import psutil

        p = psutil.Process(pid)
        return p.username(), p.name()  # never cmdline() or environ(): they can hold secrets
    except Exception:  # gone, another PID namespace (containers), no permission, no psutil
        return None, None


__all__ = ["GpuProcess", "GpuReading", "HostReading", "read_gpu", "read_host", "text"]
