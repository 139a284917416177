"""The CPU: model, cores, clock and a theoretical peak from its vector flags, to judge CPU figures.

The peak is an upper bound: 2 FMA pipes per core x vector lanes x 2 FLOPs per FMA x clock. The clock
is the highest the kernel lists (cpufreq max), else /proc/cpuinfo's current "cpu MHz"; SMT siblings
share their core's pipes, so they are not counted. docs/bench.md gives the check and its limits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NATIVE = {"bf16": "avx512_bf16/amx_bf16", "fp16": "avx512_fp16"}
FMA_PIPES_PER_CORE = 2  # Intel since Haswell (server parts), AMD Zen 2-5: two FMA units per core


@dataclass(frozen=True)
class CpuInfo:
    """What the matmul peak estimate and the STREAM array size need to know about this CPU: the cores this
    process may use, the max clock (GHz) and where it was read, the ISA flags (vector width, FMA, AMX), and
    the last-level cache in bytes (None: unknown).
    """

    model: str
    logical_cpus: int  # usable by this process (affinity)
    cores: int  # physical cores among them (SMT siblings removed)
    clock_ghz: float | None
    clock_source: str
    flags: frozenset[str]
    last_level_cache_bytes: int | None

    def fp32_flops_per_cycle(self) -> int:
        """FLOPs per cycle per core for fp32 FMA at the widest vector width the flags show."""
        if "avx512f" in self.flags:
            lanes = 16
        elif "avx2" in self.flags or "avx" in self.flags:
            lanes = 8
        else:
            lanes = 4  # SSE
        fma = 2 if ("fma" in self.flags or "avx512f" in self.flags) else 1  # without FMA: mul + add pipes
        return FMA_PIPES_PER_CORE * lanes * fma

    def peak_tflops(self, dtype: str) -> tuple[float | None, str]:
        """(peak, how it was derived); None when the clock is unknown."""
        if not self.clock_ghz:
            return None, "no CPU clock in /proc/cpuinfo"
        per_cycle = self.fp32_flops_per_cycle()
        how = f"{self.cores} cores x {self.clock_ghz:.2f} GHz x {per_cycle} fp32 FLOP/cycle"
        if dtype == "bf16" and "amx_bf16" in self.flags:
            per_cycle, how = 1024, f"{self.cores} cores x {self.clock_ghz:.2f} GHz x 1024 (AMX bf16)"
        elif dtype == "bf16" and "avx512_bf16" in self.flags:
            per_cycle, how = per_cycle * 2, how + " x 2 (avx512_bf16)"
        elif dtype == "fp16" and "avx512_fp16" in self.flags:
            per_cycle, how = per_cycle * 2, how + " x 2 (avx512_fp16)"
        elif dtype in ("bf16", "fp16"):
            return None, f"no native {dtype} math on this CPU (no {_NATIVE[dtype]} flag): emulated, no peak"
        return self.cores * self.clock_ghz * 1e9 * per_cycle / 1e12, how

    def to_dict(self) -> dict[str, Any]:
        """The CPU as JSON (the ``device.cpu`` object of ``gpuwise bench --json``), vector flags only."""
        return {
            "model": self.model,
            "logical_cpus": self.logical_cpus,
            "cores": self.cores,
            "clock_ghz": self.clock_ghz,
            "clock_source": self.clock_source,
            "vector_flags": sorted(f for f in self.flags if f.startswith(("avx", "fma", "amx"))),
            "last_level_cache_bytes": self.last_level_cache_bytes,
        }


def _field(block: str, key: str) -> str | None:
    for line in block.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return None


def _size_bytes(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else None


def parse_cpuinfo(
    text: str, usable_cpus: int, max_khz: int | None = None, llc_size: str | None = None
) -> CpuInfo:
    """A CpuInfo from /proc/cpuinfo text (pure, so tests feed it other machines' files)."""
    first = text.split("\n\n")[0]
    model = _field(first, "model name") or _field(first, "Hardware") or "unknown CPU"
    flags = frozenset((_field(first, "flags") or "").split())
    siblings = int(_field(first, "siblings") or 0)
    per_socket_cores = int(_field(first, "cpu cores") or 0)
    smt = siblings // per_socket_cores if siblings and per_socket_cores and siblings > per_socket_cores else 1
    cores = max(1, usable_cpus // smt)
    clock: float | None
    if max_khz:
        clock, source = max_khz / 1e6, "cpufreq cpuinfo_max_freq"
    else:
        mhz = _field(first, "cpu MHz")
        clock, source = (float(mhz) / 1000, "/proc/cpuinfo cpu MHz (current)") if mhz else (None, "unknown")
    llc = _size_bytes(llc_size) if llc_size else None
    return CpuInfo(model, usable_cpus, cores, clock, source, flags, llc)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def this_cpu() -> CpuInfo:
    """This machine's CPU, from /proc/cpuinfo, the CPUs in this process's affinity mask and /sys (max clock,
    L3 or else L2 cache size).
    """
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    max_khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    llc = None
    for index in (3, 2):
        llc = _read(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size")
        if llc:
            break
    return parse_cpuinfo(
        _read("/proc/cpuinfo") or "",
        usable,
        int(max_khz) if max_khz and max_khz.strip().isdigit() else None,
        llc,
    )


__all__ = ["CpuInfo", "parse_cpuinfo", "this_cpu"]
