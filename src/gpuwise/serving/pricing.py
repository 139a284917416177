"""Money for serving: the $/GPU-hour lookup (one place) and $ per 1M input / output tokens.

``usd_per_gpu_hour`` is the only price lookup of the serving path, so a catalog price API
(``price(gpu_id, kind)``) replaces its body in one line. ``token_prices`` is the one definition of
"$ per 1M tokens" that ``cost`` and ``plan`` show for serving workloads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuwise.catalog import GPU
from gpuwise.perf.cost import Price, gpu_price, hours_per_month
from gpuwise.workload import Workload

__all__ = ["MILLION", "SECONDS_PER_HOUR", "TokenPrices", "token_prices", "usd_per_gpu_hour"]


MILLION = 1_000_000
SECONDS_PER_HOUR = 3600.0


def usd_per_gpu_hour(gpu: GPU, workload: Workload | None = None) -> Price:
    """The price of one GPU-hour: the workload's override, else the catalog's verified price."""
    return gpu_price(gpu, workload)


@dataclass(frozen=True)
class TokenPrices:
    """What a deployment serving ``rate_rps`` costs per token, all hours of the month paid.

    Input and output tokens are priced apart, as APIs do: the monthly bill is split by the GPU
    time each side takes (``input_share`` = prefill seconds / (prefill + decode seconds) per
    request), then divided by the tokens of that side. ``blended`` divides the whole bill by all
    tokens and is what a single "$ per 1M tokens" compares against.
    """

    monthly_usd: float
    gpu_hours_per_month: float
    input_tokens_per_month: float
    output_tokens_per_month: float
    input_share: float
    usd_per_million_input: float
    usd_per_million_output: float
    usd_per_million_blended: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the token prices."""
        return asdict(self)


def token_prices(
    usd_per_hour: float,
    gpus: int,
    rate_rps: float,
    prompt_tokens: float,
    output_tokens: float,
    input_share: float,
) -> TokenPrices:
    """Prices for ``gpus`` GPUs at ``usd_per_hour`` each serving ``rate_rps`` requests/s."""
    hours = hours_per_month()
    gpu_hours = gpus * hours
    monthly = usd_per_hour * gpu_hours
    seconds = hours * SECONDS_PER_HOUR
    tokens_in = rate_rps * prompt_tokens * seconds
    tokens_out = rate_rps * output_tokens * seconds
    share = min(max(input_share, 0.0), 1.0)

    def per_million(usd: float, tokens: float) -> float:
        return usd / tokens * MILLION if tokens else float("inf")

    return TokenPrices(
        monthly_usd=monthly,
        gpu_hours_per_month=gpu_hours,
        input_tokens_per_month=tokens_in,
        output_tokens_per_month=tokens_out,
        input_share=share,
        usd_per_million_input=per_million(monthly * share, tokens_in),
        usd_per_million_output=per_million(monthly * (1 - share), tokens_out),
        usd_per_million_blended=per_million(monthly, tokens_in + tokens_out),
    )
