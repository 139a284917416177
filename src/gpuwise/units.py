"""Unit constants and formatting. Decimal GB (1e9) vs binary GiB (2**30) are always labelled."""

from __future__ import annotations

__all__ = ["GB", "MB", "GiB", "MiB", "fmt_duration", "fmt_rate", "to_bytes"]

GB = 1_000_000_000
GiB = 1024**3
MB = 1_000_000
MiB = 1024**2


def to_bytes(value: float, unit: str) -> float:
    """Convert a value in GB/GiB/MB/MiB (case-insensitive) to bytes."""
    factors = {"gb": GB, "gib": GiB, "mb": MB, "mib": MiB, "b": 1, "bytes": 1}
    try:
        return value * factors[unit.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown memory unit {unit!r} (use GB, GiB, MB or MiB)") from None


def fmt_duration(seconds: float) -> str:
    """Human duration: 850 ms, 12.3 s, 4.2 min, 3.1 h, 2.5 days."""
    if seconds < 1:
        return f"{seconds * 1000:,.0f} ms"
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86400:,.1f} days"


def fmt_rate(per_second: float) -> str:
    """A throughput with the digits that matter: 2,773 but 0.12 (a diffusion model's images/s)."""
    return f"{per_second:,.0f}" if per_second >= 10 else f"{per_second:,.2f}"
