"""Dated GPU prices: cloud rates (on-demand, spot, reserved) and purchase prices, each with its source.

Every row of ``data/prices.csv`` names where the figure comes from and when (``as_of``: the
publication date when known, else the day it was read from the named snapshot). Prices move:
they are evidence for a comparison, not quotes. For each GPU and kind the first row listed is the
one used by default; the others are shown as alternatives. A GPU may carry an on-demand row
with no price: its ``source`` then says why none is given (not rented, export-only part, ...).
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal

from gpuwise.catalog.bundled import bundled_text
from gpuwise.errors import GpuwiseError

PriceKind = Literal["on_demand", "spot", "reserved_1y", "reserved_3y", "purchase_gpu", "purchase_server"]
PRICE_KINDS: tuple[PriceKind, ...] = (
    "on_demand",
    "spot",
    "reserved_1y",
    "reserved_3y",
    "purchase_gpu",
    "purchase_server",
)
HOURLY_KINDS: tuple[PriceKind, ...] = ("on_demand", "spot", "reserved_1y", "reserved_3y")
PriceUnit = Literal["gpu_hour", "gpu", "server"]
_UNITS: tuple[PriceUnit, ...] = ("gpu_hour", "gpu", "server")


@dataclass(frozen=True)
class GpuPrice:
    """One dated, sourced price of one GPU (a row of prices.csv), in US dollars per ``unit``."""

    gpu_id: str
    kind: PriceKind
    usd: float  # per unit
    unit: PriceUnit  # gpu_hour: $ per GPU-hour; gpu: $ per GPU bought; server: $ per server of `gpus`
    gpus: int  # GPUs in the priced instance or server (hourly rates are already divided by it)
    provider: str
    source: str
    as_of: str  # ISO date

    @property
    def usd_per_gpu(self) -> float:
        """Per GPU: the hourly rate, or a purchase price divided over the server's GPUs."""
        return self.usd / self.gpus if self.unit == "server" else self.usd

    def to_dict(self) -> dict[str, Any]:
        """Every field as a JSON-ready mapping (the `gpus ID --json` price object)."""
        return asdict(self)


def _row(row: dict[str, str], line: int) -> GpuPrice | tuple[str, str]:
    """A price, or (gpu_id, reason) for a documented absence of one."""
    where = f"prices.csv line {line}: "
    kind, unit = row["kind"], row["unit"]
    if kind not in PRICE_KINDS or unit not in _UNITS:
        raise GpuwiseError(f"{where}unknown kind {kind!r} or unit {unit!r}")
    if not row["source"].strip() or not row["as_of"].strip():
        raise GpuwiseError(f"{where}every price needs a source and an as_of date")
    if not row["usd"].strip():
        return row["gpu_id"], row["source"]
    usd = float(row["usd"])
    if usd <= 0:
        raise GpuwiseError(f"{where}price must be positive, got {usd}")
    return GpuPrice(
        gpu_id=row["gpu_id"],
        kind=kind,
        usd=usd,
        unit=unit,
        gpus=int(row["gpus"] or 1),
        provider=row["provider"],
        source=row["source"],
        as_of=row["as_of"],
    )


@lru_cache(maxsize=1)
def _table() -> tuple[tuple[GpuPrice, ...], dict[str, str]]:
    text = bundled_text("gpuwise.catalog", "data/prices.csv")
    listed: list[GpuPrice] = []
    reasons: dict[str, str] = {}
    for line, row in enumerate(csv.DictReader(text.splitlines()), start=2):
        item = _row(row, line)
        if isinstance(item, GpuPrice):
            listed.append(item)
        else:
            reasons[item[0]] = item[1]
    return tuple(listed), reasons


def all_prices() -> list[GpuPrice]:
    """Every listed price, in prices.csv order (the first per GPU and kind is the default)."""
    return list(_table()[0])


def prices_for(gpu_id: str) -> list[GpuPrice]:
    """Every listed price of a GPU, in file order (the default of each kind first)."""
    key = gpu_id.strip().lower()
    return [p for p in _table()[0] if p.gpu_id == key]


def price(gpu_id: str, kind: PriceKind = "on_demand") -> GpuPrice | None:
    """The default price of ``kind`` for a GPU, None when none is published."""
    return next((p for p in prices_for(gpu_id) if p.kind == kind), None)


def no_price_reason(gpu_id: str) -> str | None:
    """Why a GPU has no on-demand price, when the catalog documents it."""
    return _table()[1].get(gpu_id.strip().lower())


__all__ = [
    "HOURLY_KINDS",
    "PRICE_KINDS",
    "GpuPrice",
    "PriceKind",
    "PriceUnit",
    "all_prices",
    "no_price_reason",
    "price",
    "prices_for",
]
