"""Serving engines' scheduler defaults, so an unset knob in ``serving:`` means what the engine does.

Each default is the engine's documented launch default (the argument docs named per engine);
the workload's knobs override them. ``step_overhead_factor`` scales the perf model's per-step
host overhead (engines with CUDA graphs and an async scheduler: 1.0).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.workload.serving import Engine, ServingSpec


@dataclass(frozen=True)
class EngineDefaults:
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_block_size: int
    gpu_memory_utilization: float
    step_overhead_factor: float
    source: str
    # Without chunked prefill, whole prompts either share an iteration with the running decodes
    # (TensorRT-LLM's in-flight batching) or pause them (vLLM's scheduler without chunking).
    decode_during_prefill: bool = False


ENGINE_DEFAULTS: dict[Engine, EngineDefaults] = {
    "vllm": EngineDefaults(
        256, 8192, True, 16, 0.90, 1.0, "vLLM engine arguments (V1): max_num_seqs 256, chunked prefill on"
    ),
    "sglang": EngineDefaults(
        256, 8192, True, 1, 0.88, 1.0, "SGLang server arguments: chunked_prefill_size 8192, page_size 1"
    ),
    "tensorrt-llm": EngineDefaults(
        256,
        8192,
        False,
        32,
        0.90,
        0.8,
        "TensorRT-LLM LLM API: max_num_tokens 8192, tokens_per_block 32, in-flight batching",
        decode_during_prefill=True,
    ),
    "tgi": EngineDefaults(
        128,
        4096,
        True,
        16,
        0.90,
        1.2,
        "TGI launcher: max_concurrent_requests 128, max_batch_prefill_tokens 4096",
    ),
    "llama.cpp": EngineDefaults(
        4, 2048, True, 256, 0.90, 2.0, "llama.cpp server: 4 parallel slots, n_batch 2048, no paged KV"
    ),
}

# Speculative decoding: each proposed token costs a draft forward pass; a small draft head or
# model (EAGLE, Medusa, a 1B draft for an 8B target) runs at roughly this fraction of the target's
# decode step per proposed token. Assumption (EAGLE paper, arXiv:2401.15077, reports the draft
# head at a few percent of the target's cost); override it by measuring.
DRAFT_COST_FRACTION = 0.05


@dataclass(frozen=True)
class SchedulerConfig:
    """The knobs the simulator uses: the spec's values, else the engine's defaults."""

    engine: Engine
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_block_size: int
    gpu_memory_utilization: float
    step_overhead_factor: float
    speculative_tokens: int
    acceptance_rate: float
    decode_during_prefill: bool


def scheduler_config(spec: ServingSpec) -> SchedulerConfig:
    d = ENGINE_DEFAULTS[spec.engine]
    return SchedulerConfig(
        engine=spec.engine,
        max_num_seqs=spec.max_num_seqs or d.max_num_seqs,
        max_num_batched_tokens=spec.max_num_batched_tokens or d.max_num_batched_tokens,
        chunked_prefill=d.chunked_prefill if spec.chunked_prefill is None else spec.chunked_prefill,
        kv_block_size=spec.kv_block_size or d.kv_block_size,
        gpu_memory_utilization=spec.gpu_memory_utilization or d.gpu_memory_utilization,
        step_overhead_factor=d.step_overhead_factor,
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
