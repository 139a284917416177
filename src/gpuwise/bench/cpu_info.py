"""The CPU: model, cores, clock and a theoretical peak from its microarchitecture, to judge CPU figures.

The peak is cores x clock x FLOP/cycle, FLOP/cycle from the core family's FMA datapaths
(bench/cpu_uarch.py, a sourced table); for a family not in the table, from the vector flags (2 FMA
pipes x lanes x 2), said as such. The clock is the boost clock when the kernel lists it (cpufreq
``cpuinfo_max_freq``), else /proc/cpuinfo's current "cpu MHz" (VMs), and the figure says which. SMT
siblings share their core's pipes, so they are not counted. docs/bench.md gives the check and its limits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.bench.cpu_uarch import TURBO_ALLOWANCE, Uarch, identity, lookup

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
    identity: str = "?"  # the table key: 'GenuineIntel:6:106', 'arm:0x41:0xd0c'
    uarch: Uarch | None = None  # the table row; None: peak from the flags alone

    @property
    def clock_is_boost(self) -> bool:
        """True when the clock is cpufreq's max (the boost clock where the driver lists it)."""
        return self.clock_source.startswith("cpufreq")

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

    def per_cycle(self, dtype: str) -> tuple[int | None, str]:
        """(FLOP/cycle/core for ``dtype``, how): from the table row, else from the flags; None for a dtype
        without native math (torch emulates it through fp32 on slow paths: no peak claimed)."""
        u = self.uarch
        if u is not None:
            fma = f"{u.fma_units} x {u.vector_bits}-bit FMA"
            how = f"{u.family}: {fma} = {u.fp32_flop_per_cycle} fp32 FLOP/cycle"
            if dtype == "fp32":
                return u.fp32_flop_per_cycle, how
            if dtype == "bf16" and u.bf16_flop_per_cycle and u.bf16_feature in self.flags:
                return (
                    u.bf16_flop_per_cycle,
                    f"{u.family}: {u.bf16_flop_per_cycle} bf16 FLOP/cycle ({u.bf16_feature})",
                )
            if dtype == "fp16" and "avx512_fp16" in self.flags:
                return 2 * u.fp32_flop_per_cycle, how + " x 2 (avx512_fp16)"
            return None, f"no native {dtype} matmul on {u.family}: emulated, no peak"
        per_cycle = self.fp32_flops_per_cycle()
        how = f"unknown core ({self.identity}): {per_cycle} fp32 FLOP/cycle from the ISA flags alone"
        if dtype == "fp32":
            return per_cycle, how
        if dtype == "bf16" and "amx_bf16" in self.flags:
            return 1024, how.replace(f"{per_cycle} fp32", "1024 bf16 (AMX)")
        if (dtype == "bf16" and "avx512_bf16" in self.flags) or (
            dtype == "fp16" and "avx512_fp16" in self.flags
        ):
            return 2 * per_cycle, how + f" x 2 (native {dtype})"
        return None, f"no native {dtype} math on this CPU (no {_NATIVE[dtype]} flag): emulated, no peak"

    def peak_tflops(self, dtype: str) -> tuple[float | None, str]:
        """(peak, how it was derived, with the clock and where it was read); None when the clock is unknown
        or the dtype has no native math."""
        if not self.clock_ghz:
            return None, "no CPU clock in /proc/cpuinfo"
        per_cycle, how = self.per_cycle(dtype)
        if per_cycle is None:
            return None, how
        clock = f"{self.clock_ghz:.2f} GHz ({self.clock_source})"
        return self.cores * self.clock_ghz * 1e9 * per_cycle / 1e12, f"{self.cores} cores x {clock} x {how}"

    def plausible_pct(self) -> tuple[float, float, str]:
        """(low, high, why): the % of peak a well-tuned SGEMM reaches on this core family; the high bound
        times TURBO_ALLOWANCE when the clock is not the boost clock."""
        low, high, why = 25.0, 110.0, "unknown core: a wide band"
        if self.uarch is not None:
            low, high = self.uarch.blas_low_pct, self.uarch.blas_high_pct
            why = f"well-tuned SGEMM on {self.uarch.family} (bench/data/cpu_uarch.csv)"
        if not self.clock_is_boost:
            high *= TURBO_ALLOWANCE
            why += f"; high x {TURBO_ALLOWANCE:g}: the boost clock is not visible here"
        return low, high, why

    def to_dict(self) -> dict[str, Any]:
        """The CPU as JSON (the ``device.cpu`` object of ``gpuwise bench --json``), vector flags only."""
        return {
            "model": self.model,
            "logical_cpus": self.logical_cpus,
            "cores": self.cores,
            "clock_ghz": self.clock_ghz,
            "clock_source": self.clock_source,
            "microarchitecture": None if self.uarch is None else self.uarch.family,
            "microarchitecture_source": None if self.uarch is None else self.uarch.source,
            "matmul_plausible_pct": list(self.plausible_pct()[:2]),
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
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in first.splitlines())}
    model = _field(first, "model name") or _field(first, "Hardware") or "unknown CPU"
    flags = frozenset((_field(first, "flags") or _field(first, "Features") or "").split())
    siblings = int(_field(first, "siblings") or 0)
    per_socket_cores = int(_field(first, "cpu cores") or 0)
    smt = siblings // per_socket_cores if siblings and per_socket_cores and siblings > per_socket_cores else 1
    cores = max(1, usable_cpus // smt)
    clock: float | None
    if max_khz:
        clock, source = max_khz / 1e6, "cpufreq cpuinfo_max_freq, the boost clock"
    else:
        mhz = _field(first, "cpu MHz")
        clock, source = (float(mhz) / 1000, "/proc/cpuinfo cpu MHz (current)") if mhz else (None, "unknown")
    llc = _size_bytes(llc_size) if llc_size else None
    key = identity(fields)
    return CpuInfo(model, usable_cpus, cores, clock, source, flags, llc, key, lookup(key))


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
