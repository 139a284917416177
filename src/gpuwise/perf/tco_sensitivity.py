"""How the buy-vs-rent answer moves with the two prices nobody knows in advance.

Rental prices fell by half for H100s within two years of launch, and what a GPU resells for after
the amortization period is a guess; a buy-vs-rent verdict that flips inside that range is not a
verdict. This module re-runs the comparison at the on-demand price ±30 % (the band the issue of
rental-price risk is usually stated in) and at resale values of 0, 20 and 40 % of the purchase
price: computed sensitivities of the user's own inputs, not forecasts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # tco.py builds these cases: only the types are needed here
    from gpuwise.perf.tco import OwnCost, TcoInputs

__all__ = ["RENT_FACTORS", "RESALE_SHARES", "RentCase", "ResaleCase", "rent_cases", "resale_cases"]

RENT_FACTORS = (0.7, 1.0, 1.3)  # on-demand price × this
RESALE_SHARES = (0.0, 0.2, 0.4)  # of the purchase price, recovered at the end of the amortization


@dataclass(frozen=True)
class RentCase:
    """Owning vs renting on demand when the rental price is ``rent_factor`` × today's."""

    rent_factor: float
    usd_per_gpu_hour: float
    rent_usd_per_month: float
    own_usd_per_month: float
    cheaper: Literal["own", "rent"]
    break_even_held_hours_per_month: float | None  # owning wins above it (None: never within the month)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the fields as they are."""
        return asdict(self)


@dataclass(frozen=True)
class ResaleCase:
    """Owning's monthly cost when the GPUs resell for ``resale_share`` of their price at the end."""

    resale_share: float
    own_usd_per_month: float
    cheaper_than_rent: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the fields as they are."""
        return asdict(self)


def rent_cases(i: TcoInputs, own: OwnCost, on_demand_usd: float) -> tuple[RentCase, ...]:
    """Own vs rent at each of RENT_FACTORS × the on-demand $/GPU-hour, over the held hours."""
    power_per_hour = own.power_usd / i.held_hours_per_month if i.held_hours_per_month else 0.0
    out = []
    for factor in RENT_FACTORS:
        rate = on_demand_usd * factor
        rent = rate * i.num_gpus * i.held_hours_per_month
        margin = rate * i.num_gpus - power_per_hour
        hours = (own.amortization_usd + own.ops_usd) / margin if margin > 0 else None
        if hours is not None and hours > i.hours_per_month:
            hours = None
        cheaper: Literal["own", "rent"] = "own" if own.monthly_usd < rent else "rent"
        out.append(RentCase(factor, rate, rent, own.monthly_usd, cheaper, hours))
    return tuple(out)


def resale_cases(own: OwnCost, rent_usd_per_month: float | None) -> tuple[ResaleCase, ...]:
    """Owning's monthly cost at each of RESALE_SHARES (the amortized share of the price shrinks)."""
    out = []
    for share in RESALE_SHARES:
        monthly = own.amortization_usd * (1 - share) + own.power_usd + own.ops_usd
        cheaper = rent_usd_per_month is not None and monthly < rent_usd_per_month
        out.append(ResaleCase(share, monthly, cheaper))
    return tuple(out)
