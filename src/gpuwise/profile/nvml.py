"""NVML readings for one GPU, each degrading on its own to "not available".

Uses nvidia-ml-py (``import pynvml``). A query the driver or GPU does not support (or a missing
library) disables that one metric for the rest of the run and is listed in ``not_available``;
nothing here raises into the profiled program.
"""

from __future__ import annotations

import contextlib
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


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in REASON_BITS.items() if mask & bit]


class NvmlDevice:
    """Opened once per run; ``sample()`` returns whatever this GPU and driver can tell."""

    METRICS = ("utilization", "memory", "power", "temperature", "sm_clock", "clock_reasons")

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.not_available: dict[str, str] = {}
        self.name = ""
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(self._handle)
            self.name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:
            self._nvml = None
            self.not_available = {m: _why(exc) for m in self.METRICS}

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def _read(self, metric: str, fn) -> Any:
        if metric in self.not_available:
            return None
        try:
            return fn()
        except Exception as exc:
            self.not_available[metric] = _why(exc)
            return None

    def sample(self) -> dict[str, Any]:
        if not self.available:
            return {}
        nv, h = self._nvml, self._handle
        out: dict[str, Any] = {}
        util = self._read("utilization", lambda: nv.nvmlDeviceGetUtilizationRates(h))
        if util is not None:
            out["gpu_util_pct"] = float(util.gpu)
            out["mem_util_pct"] = float(util.memory)
        mem = self._read("memory", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        if mem is not None:
            out["memory_used_bytes"] = int(mem.used)
            out["memory_total_bytes"] = int(mem.total)
        power = self._read("power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        if power is not None:
            out["power_w"] = power / 1000.0  # NVML reports milliwatts
        temp = self._read("temperature", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        if temp is not None:
            out["temperature_c"] = float(temp)
        clock = self._read("sm_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        if clock is not None:
            out["sm_clock_mhz"] = float(clock)
        mask = self._read("clock_reasons", lambda: _clock_reasons(nv, h))
        if mask is not None:
            out["clock_reasons"] = decode_reasons(int(mask))
        return out

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()


def _clock_reasons(nv: Any, handle: Any) -> int:
    # Renamed "clocks event reasons" in NVML 12.x drivers; older drivers only have the throttle name.
    getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if getter is not None:
        try:
            return getter(handle)
        except Exception as exc:
            if "FunctionNotFound" not in type(exc).__name__ and "Function Not Found" not in str(exc):
                raise
    return nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle)


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) < 120 else text[:117] + "..."
