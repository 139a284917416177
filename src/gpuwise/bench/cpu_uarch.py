"""CPU matmul peaks by microarchitecture: the FMA datapaths per core (units x vector width) of each core
family, from bench/data/cpu_uarch.csv (each row with its source: vendor optimization manuals, Agner Fog,
uops.info), picked from /proc/cpuinfo's vendor, family and model numbers (x86) or implementer and part
(Arm), which VMs keep even when they hide the model name. Also the plausibility band a well-tuned SGEMM
lands in on that family.

The ISA flags alone overstate some cores: a Zen 4 core runs AVX-512 on 256-bit datapaths (32 fp32
FLOP/cycle, not the 64 that ``avx512f`` suggests), so the row, not the flags, sets the peak.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache

from gpuwise.catalog.bundled import bundled_text

# Without the boost clock (only the nominal or current one is visible), a measured figure may run above
# the peak computed at that clock by up to the max-turbo/base ratio: 1.48 on a Xeon Platinum 8380
# (2.3 GHz base, 3.4 GHz max turbo, ark.intel.com), 1.54 on an EPYC 9654 (2.4 / 3.7 GHz, amd.com).
TURBO_ALLOWANCE = 1.5


@dataclass(frozen=True)
class Uarch:
    """One row of cpu_uarch.csv: a core family's FMA datapaths, fp32 and bf16 FLOP/cycle per core, the
    SGEMM plausibility band (% of peak) and the row's caveat and source."""

    family: str
    fma_units: int
    vector_bits: int
    fp32_flop_per_cycle: int
    bf16_flop_per_cycle: int | None
    bf16_feature: str
    blas_low_pct: float
    blas_high_pct: float
    varies: str
    source: str
    match: str


@cache
def table() -> tuple[Uarch, ...]:
    """The rows of bench/data/cpu_uarch.csv (comment lines start with #)."""
    text = bundled_text("gpuwise.bench", "data/cpu_uarch.csv")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    rows = []
    for r in csv.DictReader(io.StringIO(body)):
        rows.append(
            Uarch(
                r["family"],
                int(r["fma_units"]),
                int(r["vector_bits"]),
                int(r["fp32_flop_per_cycle"]),
                int(r["bf16_flop_per_cycle"]) if r["bf16_flop_per_cycle"] else None,
                r["bf16_feature"],
                float(r["blas_low_pct"]),
                float(r["blas_high_pct"]),
                r["varies"],
                r["source"],
                r["match"],
            )
        )
    return tuple(rows)


def _in(models: str, value: int) -> bool:
    for part in models.split(";"):
        low, _, high = part.partition("-")
        if int(low) <= value <= int(high or low):
            return True
    return False


def identity(cpuinfo_first_block: dict[str, str]) -> str:
    """The key the table matches: 'GenuineIntel:6:106' (x86) or 'arm:0x41:0xd0c' (Arm)."""
    get = cpuinfo_first_block.get
    if get("CPU implementer"):
        return f"arm:{get('CPU implementer', '').lower()}:{get('CPU part', '').lower()}"
    return f"{get('vendor_id', '?')}:{get('cpu family', '?')}:{get('model', '?')}"


def lookup(key: str) -> Uarch | None:
    """The row for an identity() key, or None (an unknown core: the peak falls back to the ISA flags)."""
    if key.startswith("arm:"):
        return next((u for u in table() if u.match == key), None)
    vendor, _, rest = key.partition(":")
    family, _, model = rest.partition(":")
    if not (family.isdigit() and model.isdigit()):
        return None
    for u in table():
        for alternative in u.match.split("|"):
            v, f, models = alternative.split(":")
            if v == vendor and f == family and _in(models, int(model)):
                return u
    return None


__all__ = ["TURBO_ALLOWANCE", "Uarch", "identity", "lookup", "table"]
