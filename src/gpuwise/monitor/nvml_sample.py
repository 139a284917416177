"""The one NVML sampling layer: every device reading gpuwise takes (the profiler's and the monitor's).

Uses nvidia-ml-py (``import pynvml``). Each query degrades on its own: a query the GPU or driver cannot
answer (not supported, no permission, function missing in this driver) gives None for that field and
is not asked again; any other error gives None for this sample only. A lost GPU raises `GpuLost` so a
caller can mark the whole device lost instead of showing a row of "n/a".
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

# NVML clock-event ("throttle") reason bits -> the names gpuwise reports (nvml.h, nvmlClocksEventReason*).
REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# NVML return codes that will not change while the process runs: stop asking (nvml.h NVML_ERROR_*).
_PERMANENT = {2: "invalid argument", 3: "not supported", 4: "no permission", 13: "function not found"}
_GPU_IS_LOST = 15


class GpuLost(Exception):
    """NVML says the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST): every later call would fail too."""


def decode_reasons(mask: int) -> list[str]:
    """The names of the clock-event reasons set in an NVML bitmask (unknown bits are dropped)."""
    return [name for bit, name in REASON_BITS.items() if mask & bit]


def why(exc: BaseException) -> str:
    """An exception as one short line for "n/a" reasons (at most 120 characters)."""
    text = str(exc) or type(exc).__name__
    return text if len(text) < 120 else text[:117] + "..."


def error_code(exc: BaseException) -> int | None:
    """The NVML return code of an ``NVMLError``; None for any other exception."""
    return getattr(exc, "value", None) if type(exc).__name__.startswith("NVMLError") else None


def clock_reasons(nv: Any, handle: Any) -> int:
    """The device's current clock-event reason bitmask, through the NVML 12.x name when the driver has it,
    else the older "throttle reasons" name.
    """
    # Renamed "clocks event reasons" in NVML 12.x drivers; older drivers only have the throttle name.
    getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if getter is not None:
        try:
            return getter(handle)
        except Exception as exc:
            if error_code(exc) != 13 and "Function Not Found" not in str(exc):
                raise
    return nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle)


def memory_info(nv: Any, handle: Any, read: Callable[[str, Callable[[], Any]], Any]) -> tuple[Any, bool]:
    """(NVML memory struct or None, True when it is the v2 one): ``nvmlDeviceGetMemoryInfo_v2`` where the
    driver has it (``used`` excludes the driver's reserved memory: what nvidia-smi and nvitop show),
    else the v1 call (``used`` includes the reserved memory, ~0.6 GiB more on an 80 GB GPU). A driver
    without v2 is asked only once (``read`` skips a permanent failure)."""
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is not None:
        mem = read("memory_v2", lambda: nv.nvmlDeviceGetMemoryInfo(handle, version))
        if mem is not None and hasattr(mem, "reserved"):
            return mem, True
    return read("memory", lambda: nv.nvmlDeviceGetMemoryInfo(handle)), False


def text(value: Any) -> str:
    """NVML strings are bytes in old bindings, str in new ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class FieldReader:
    """Calls NVML queries for one device, each turned into a value or None (nvitop-style "n/a")."""

    def __init__(self) -> None:
        self.not_available: dict[str, str] = {}  # field -> why it has no value (permanent ones are skipped)
        self._permanent: set[str] = set()

    def read(self, field: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, or None when it fails: the reason is kept in ``not_available`` and a permanent failure
        (not supported, no permission, missing function, not an NVML error) skips the field from then on.
        Raises ``GpuLost`` when NVML says the GPU fell off the bus.
        """
        if field in self._permanent:
            return None
        try:
            value = fn()
        except Exception as exc:
            code = error_code(exc)
            if code == _GPU_IS_LOST:
                raise GpuLost(why(exc)) from None
            self.not_available[field] = why(exc)
            if code in _PERMANENT or code is None:  # None: not an NVML error (a binding bug): stop too
                self._permanent.add(field)
            return None
        self.not_available.pop(field, None)
        return value


def init_nvml() -> Any:
    """``pynvml`` after nvmlInit; raises ImportError or the NVML error (no driver, no library)."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


class NvmlDevice:
    """The profiler's view of one GPU: opened once per run, ``sample()`` returns a small flat dict.

    Reads only the six fields the profiler summarizes (the monitor's full reading is `gpu_reading`);
    nothing here raises into the profiled program.
    """

    METRICS = ("utilization", "memory", "power", "temperature", "sm_clock", "clock_reasons")

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.name = ""
        self.fields = FieldReader()
        self._nvml: Any = None
        self._handle: Any = None
        try:
            self._nvml = init_nvml()
            self._handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            self.name = text(self._nvml.nvmlDeviceGetName(self._handle))
        except Exception as exc:
            self._nvml = None
            self.fields.not_available = {m: why(exc) for m in self.METRICS}

    @property
    def not_available(self) -> dict[str, str]:
        """Field → why it has no value (the profiler's "n/a" reasons)."""
        return self.fields.not_available

    @property
    def available(self) -> bool:
        """True while NVML is open for this device (False: never opened, or the GPU was lost)."""
        return self._nvml is not None

    def sample(self) -> dict[str, Any]:
        """The six profiler fields as a flat dict; empty when NVML is not available or the GPU was just lost
        (then every metric is marked not available and the device is not asked again).
        """
        if not self.available:
            return {}
        try:
            return self._sample()
        except GpuLost as lost:
            self.fields.not_available.update({m: str(lost) for m in self.METRICS})
            self._nvml = None
            return {}

    def _sample(self) -> dict[str, Any]:
        nv, h, read = self._nvml, self._handle, self.fields.read
        out: dict[str, Any] = {}
        util = read("utilization", lambda: nv.nvmlDeviceGetUtilizationRates(h))
        if util is not None:
            out["gpu_util_pct"] = float(util.gpu)
            out["mem_util_pct"] = float(util.memory)
        mem, _ = memory_info(nv, h, read)
        self.fields.not_available.pop("memory_v2", None)  # v1 answered instead: not a missing field
        if mem is not None:
            out["memory_used_bytes"] = int(mem.used)
            out["memory_total_bytes"] = int(mem.total)
        power = read("power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        if power is not None:
            out["power_w"] = power / 1000.0  # NVML reports milliwatts
        temp = read("temperature", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        if temp is not None:
            out["temperature_c"] = float(temp)
        clock = read("sm_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        if clock is not None:
            out["sm_clock_mhz"] = float(clock)
        mask = read("clock_reasons", lambda: clock_reasons(nv, h))
        if mask is not None:
            out["clock_reasons"] = decode_reasons(int(mask))
        return out

    def close(self) -> None:
        """Shut NVML down; errors are ignored (the profiled program must not see them)."""
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()


__all__ = [
    "REASON_BITS",
    "FieldReader",
    "GpuLost",
    "NvmlDevice",
    "clock_reasons",
    "decode_reasons",
    "error_code",
    "init_nvml",
    "memory_info",
    "text",
    "why",
]
