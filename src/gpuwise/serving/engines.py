"""Serving engines' scheduler defaults, so an unset knob in ``serving:`` means what the engine does.

Each default is the engine's documented launch default (the argument docs named per engine);
the workload's knobs override them. Each engine's speed relative to vLLM (``step_time_factor``) and
the cost of a speculative draft come from ``data/engines.toml``, every row with its sources and whether
it is published or an assumption.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from gpuwise.catalog.bundled import bundled_text
from gpuwise.workload.engine_defaults import (
    ENGINE_DEFAULTS,
    resolved_gpu_memory_utilization,
    resolved_kv_block_size,
)
from gpuwise.workload.serving import Engine, ServingSpec

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.catalog.models import ModelArch

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


__all__ = [
    "SchedulerConfig",
    "draft_cost_fraction",
    "engine_data",
    "scheduler_config",
    "step_time_factor",
    "tokens_per_decode_step",
]


@cache
def engine_data() -> dict[str, Any]:
    """``data/engines.toml``: per-engine speed factors and the draft's shape, with their sources."""
    text = bundled_text("gpuwise.serving", "data/engines.toml")
    return tomllib.loads(text)


def step_time_factor(engine: Engine) -> float:
    """Every iteration's time on ``engine`` relative to vLLM's."""
    return float(engine_data()["engine"][engine]["step_time_factor"])


def draft_cost_fraction(arch: ModelArch) -> float:
    """One proposed token's draft pass over one target decode step: EAGLE's draft is ``layers`` decoder
    layer(s) plus the target's LM head (data/engines.toml), and a decode step costs the weights it reads,
    so the fraction is (draft layers + LM head) / (all layers + LM head) in active parameters."""
    draft = engine_data()["draft"]
    counts = arch.param_counts()
    layer = counts.per_layer_attention + counts.active_per_layer_mlp + counts.per_layer_norm
    head = counts.lm_head or counts.embedding  # a tied head reads the embedding matrix
    head_read = head if draft["uses_target_lm_head"] else 0
    return (draft["layers"] * layer + head_read) / (counts.num_layers * layer + head)


@dataclass(frozen=True)
class SchedulerConfig:
    """The knobs the simulator uses: the spec's values, else the engine's defaults."""

    engine: Engine
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_block_size: int
    gpu_memory_utilization: float
    step_time_factor: float  # the engine's speed relative to vLLM (data/engines.toml)
    speculative_tokens: int
    acceptance_rate: float
    decode_during_prefill: bool


def scheduler_config(spec: ServingSpec) -> SchedulerConfig:
    """The simulator's knobs for ``spec``: each value the spec sets, else the engine's documented default."""
    d = ENGINE_DEFAULTS[spec.engine]
    return SchedulerConfig(
        engine=spec.engine,
        max_num_seqs=spec.max_num_seqs or d.max_num_seqs,
        max_num_batched_tokens=spec.max_num_batched_tokens or d.max_num_batched_tokens,
        chunked_prefill=d.chunked_prefill if spec.chunked_prefill is None else spec.chunked_prefill,
        kv_block_size=resolved_kv_block_size(spec),
        gpu_memory_utilization=resolved_gpu_memory_utilization(spec),
        step_time_factor=step_time_factor(spec.engine),
        speculative_tokens=spec.speculative_tokens,
        acceptance_rate=spec.acceptance_rate,
        decode_during_prefill=d.decode_during_prefill,
    )


def tokens_per_decode_step(cfg: SchedulerConfig) -> float:
    """Expected tokens a sequence emits per step: 1, or with k draft tokens accepted at rate a,
    (1 − a^(k+1)) / (1 − a) (the standard speculative-decoding expectation, Leviathan et al. 2023)."""
    k, a = cfg.speculative_tokens, cfg.acceptance_rate
    if k == 0:
        return 1.0
    return (1 - a ** (k + 1)) / (1 - a)
