"""Serving engines' documented launch defaults, for the knobs of ``serving:`` left unset.

They live below ``perf`` and ``serving`` because both resolve the same knobs: the KV-cache capacity
(``gpuwise.perf.kv_capacity``, block size and memory share) and the scheduler of the simulator
(``gpuwise.serving.engines.scheduler_config``). Each row names the engine argument docs it is taken from.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.workload.serving import Engine, ServingSpec

__all__ = [
    "ENGINE_DEFAULTS",
    "EngineDefaults",
    "resolved_gpu_memory_utilization",
    "resolved_kv_block_size",
]


@dataclass(frozen=True)
class EngineDefaults:
    """One engine's defaults: batch limits (sequences, tokens per iteration), chunked prefill, KV block
    size in tokens, the share of device memory (0-1) the engine takes, and where they come from."""

    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    kv_block_size: int
    gpu_memory_utilization: float
    source: str
    # Without chunked prefill, whole prompts either share an iteration with the running decodes
    # (TensorRT-LLM's in-flight batching) or pause them (vLLM's scheduler without chunking).
    decode_during_prefill: bool = False


ENGINE_DEFAULTS: dict[Engine, EngineDefaults] = {
    "vllm": EngineDefaults(
        256, 8192, True, 16, 0.90, "vLLM engine arguments (V1): max_num_seqs 256, chunked prefill on"
    ),
    "sglang": EngineDefaults(
        256, 8192, True, 1, 0.88, "SGLang server arguments: chunked_prefill_size 8192, page_size 1"
    ),
    "tensorrt-llm": EngineDefaults(
        256,
        8192,
        False,
        32,
        0.90,
        "TensorRT-LLM LLM API: max_num_tokens 8192, tokens_per_block 32, in-flight batching",
        decode_during_prefill=True,
    ),
    "tgi": EngineDefaults(
        128,
        4096,
        True,
        16,
        0.90,
        "TGI launcher: max_concurrent_requests 128, max_batch_prefill_tokens 4096",
    ),
    "llama.cpp": EngineDefaults(
        4, 2048, True, 256, 0.90, "llama.cpp server: 4 parallel slots, n_batch 2048, no paged KV"
    ),
}


def resolved_kv_block_size(spec: ServingSpec) -> int:
    """Tokens per KV-cache block (page): the spec's value, else the engine's default."""
    return spec.kv_block_size or ENGINE_DEFAULTS[spec.engine].kv_block_size


def resolved_gpu_memory_utilization(spec: ServingSpec) -> float:
    """Share of device memory (0-1) the engine takes: the spec's value, else the engine's default."""
    return spec.gpu_memory_utilization or ENGINE_DEFAULTS[spec.engine].gpu_memory_utilization
