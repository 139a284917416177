"""Every number a report shows is formatted here, so one figure reads the same in every view and format.

Memory is binary GiB/MiB (what ``torch.cuda`` statistics divided by 2**30 give) unless a helper says
decimal (trace file sizes, datasheet GB); money is US dollars; "—" stands for a missing value.
"""

from __future__ import annotations

from gpuwise.units import GiB, MiB, fmt_duration

MISSING = "—"

__all__ = [
    "MISSING",
    "decimal_size",
    "duration",
    "gib",
    "mib",
    "ms",
    "num",
    "pct",
    "tokens",
    "usd",
]

duration = fmt_duration  # 850 ms, 12.3 s, 4.2 min, 3.1 h, 2.5 days


def num(value: float | None, fmt: str = "{:,.0f}", unit: str = "") -> str:
    """A number with thousands separators (and an optional unit), or "—"."""
    return MISSING if value is None else fmt.format(value) + unit


def usd(value: float | None, digits: int = 2) -> str:
    """Dollars: cents below $1,000 ($12.35), whole dollars above ($12,345)."""
    if value is None:
        return MISSING
    if abs(value) >= 1000:
        return f"${value:,.0f}"
    return f"${value:,.{digits}f}"


def gib(n: float | None, digits: int = 2) -> str:
    """Bytes as binary GiB without the unit (tables say GiB in the header)."""
    return MISSING if n is None else f"{n / GiB:,.{digits}f}"


def mib(n: float | None, digits: int = 1) -> str:
    """Bytes as MiB (2**20) with `digits` decimals, the missing-value mark for None."""
    return MISSING if n is None else f"{n / MiB:,.{digits}f}"


def ms(seconds: float | None, digits: int = 1) -> str:
    """Seconds shown as milliseconds: 12.3 ms."""
    return MISSING if seconds is None else f"{seconds * 1000:,.{digits}f} ms"


def pct(value: float | None, digits: int = 1) -> str:
    """A share as "12.3 %", the missing-value mark for None."""
    return MISSING if value is None else f"{value:.{digits}f} %"


def tokens(value: float) -> str:
    """A count with a decimal suffix: 1.2 B, 350.0 M, 12.0 k."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f}"


def decimal_size(n: float) -> str:
    """Decimal units, labelled (file sizes, copies): 35.2 MB, 1.07 GB."""
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB"
