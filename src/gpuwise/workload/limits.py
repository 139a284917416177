"""Numeric limits of every workload field: finite, in range, with its unit (issue #25, item 6).

One table, read by ``validate`` (spec.py) and by the CLI's option checks (cli/options.py), so a value
is refused the same way whether it comes from a YAML file, ``--set`` or a flag. The bounds are wide
enough for any real job (a 16M-token context, 100 000 GPUs, 1M requests/s) and narrow enough that
no derived figure (bytes, FLOPs, $) overflows a 64-bit integer in a JSON document.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

__all__ = ["FIELD_LIMITS", "SERVING_LIMITS", "Limit", "first_problem", "limit_problem"]


@dataclass(frozen=True)
class Limit:
    """The allowed range of one number: ``low``..``high`` in ``unit``; ``open_low`` excludes ``low``
    itself (a price or a rate of 0 means nothing, a share of 0 % can be valid); ``open_high`` excludes
    ``high`` (a cache hit rate of 1 would mean no prompt is ever computed)."""

    low: float
    high: float
    unit: str = ""
    open_low: bool = False
    open_high: bool = False

    def describe(self) -> str:
        """The range as the error shows it: ``> 0 and ≤ 10000 $/GPU-hour``."""
        low = f"> {_num(self.low)}" if self.open_low else f"≥ {_num(self.low)}"
        unit = f" {self.unit}" if self.unit else ""
        high = f"< {_num(self.high)}" if self.open_high else f"≤ {_num(self.high)}"
        return f"a finite number {low} and {high}{unit}"

    def problem(self, name: str, value: float) -> str | None:
        """One line naming ``name`` and the range when ``value`` is outside it (None: it is valid)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        bad = not math.isfinite(value) or (value >= self.high if self.open_high else value > self.high)
        bad = bad or (value <= self.low if self.open_low else value < self.low)
        return f"{name} must be {self.describe()}, got {value!r}" if bad else None


def _num(value: float) -> str:
    return f"{int(value):,}" if value == int(value) and abs(value) >= 10_000 else f"{value:g}"


_COUNT = 1  # counts start at one: zero GPUs, a batch of zero or a zero-token sequence is meaningless
# Workload fields (spec.py). Sources: the largest published contexts (Llama 4 Scout, 10M tokens) and
# clusters (~100k GPUs, xAI Colossus 2024) bound the sizes; prices are $ per unit, never negative.
FIELD_LIMITS: dict[str, Limit] = {
    "batch_size": Limit(_COUNT, 1 << 20, "samples"),
    "seq_len": Limit(_COUNT, 1 << 24, "tokens"),
    "output_len": Limit(_COUNT, 1 << 24, "tokens"),
    "image_size": Limit(_COUNT, 1 << 16, "pixels"),
    "image_width": Limit(0, 1 << 16, "pixels (0: square)"),
    "denoising_steps": Limit(0, 10_000, "steps (0: the model's default)"),
    "grad_accum": Limit(_COUNT, 1 << 20, "steps"),
    "lora_rank": Limit(_COUNT, 1 << 16),
    "lora_alpha": Limit(0, 1 << 20),
    "num_gpus": Limit(_COUNT, 100_000, "GPUs"),
    "tp": Limit(_COUNT, 1024, "GPUs"),
    "pp": Limit(_COUNT, 1024, "stages"),
    "expert_parallel": Limit(_COUNT, 1024, "GPUs"),
    "context_parallel": Limit(_COUNT, 1024, "GPUs"),
    "concurrency": Limit(_COUNT, 1 << 20, "requests"),
    "utilization_pct": Limit(0, 100, "%", open_low=True),
    "train_tokens": Limit(0, 1e15, "tokens", open_low=True),
    "sample_tokens_mean": Limit(0, 1 << 24, "tokens", open_low=True),
    "sample_tokens_std": Limit(0, 1 << 24, "tokens"),
    "run_samples": Limit(0, 1e13, "samples", open_low=True),
    "reduce_bucket_elements": Limit(0, 1e12, "elements", open_low=True),
    "epochs": Limit(0, 1e6, open_low=True),
    "usd_per_gpu_hour": Limit(0, 10_000, "$/GPU-hour", open_low=True),
    "monthly_budget_usd": Limit(0, 1e10, "$/month", open_low=True),
    "purchase_usd_per_gpu": Limit(0, 1e7, "$ per GPU"),
    "amortization_months": Limit(0, 240, "months", open_low=True),
    "ops_usd_per_month": Limit(0, 1e9, "$/month"),
    "pue": Limit(1, 5),
    "usd_per_kwh": Limit(0, 10, "$/kWh"),
}

# The ``serving:`` section (serving.py); lengths are checked on their mean.
SERVING_LIMITS: dict[str, Limit] = {
    "rate_rps": Limit(0, 1e6, "requests/s", open_low=True),
    "tokens_per_day": Limit(0, 1e15, "tokens/day", open_low=True),
    "max_num_seqs": Limit(_COUNT, 1 << 20, "sequences"),
    "max_num_batched_tokens": Limit(_COUNT, 1 << 24, "tokens"),
    "kv_block_size": Limit(_COUNT, 1 << 16, "tokens"),
    "seed": Limit(0, 2**32 - 1),
}


def limit_problem(table: dict[str, Limit], name: str, value: Any, prefix: str = "") -> str | None:
    """The problem with ``value`` for field ``name`` of ``table`` (None: valid or not in the table)."""
    limit = table.get(name)
    if value is None or limit is None:
        return None
    return limit.problem(prefix + name, value)


def first_problem(record: Any, table: dict[str, Limit], prefix: str = "") -> str | None:
    """The first field of the dataclass ``record`` outside its limit, or any float field that is not
    finite (a field added later without a row in ``table`` still refuses NaN and infinity)."""
    if not is_dataclass(record):
        return None
    for f in fields(record):
        value = getattr(record, f.name)
        problem = limit_problem(table, f.name, value, prefix)
        if problem is None and isinstance(value, float) and not math.isfinite(value):
            problem = f"{prefix}{f.name} must be a finite number, got {value!r}"
        if problem:
            return problem
    return None
