"""KV cache: K and V for every cached token in every layer, sized by the KV heads (GQA/MQA-aware)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from gpuwise.catalog import GPU, ModelArch
from gpuwise.workload import Workload

if TYPE_CHECKING:
    from gpuwise.perf.numerics import Numerics

_KV_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}


def kv_dtype_bytes(w: Workload) -> float:
    """``auto`` follows the compute dtype (16-bit for every precision except fp32)."""
    if w.kv_cache_dtype != "auto":
        return _KV_BYTES[w.kv_cache_dtype]
    return 4.0 if w.precision == "fp32" else 2.0


def kv_cache_bytes(arch: ModelArch, w: Workload, tokens_per_sequence: int, sequences: int) -> float:
    """Per-GPU bytes: 2 (K, V) × layers/pp × KV heads/tp × head_dim × tokens × dtype.

    With tensor parallelism each GPU holds ``num_kv_heads / tp`` heads; when ``tp`` exceeds the KV
    heads they are replicated (one head per GPU), as vLLM and Megatron do.
    """
    kv_heads = max(arch.num_kv_heads // w.tp, 1) if w.tp > 1 else arch.num_kv_heads
    layers = -(-arch.num_layers // w.pp)
    return 2.0 * layers * kv_heads * arch.head_dim * tokens_per_sequence * sequences * kv_dtype_bytes(w)


@dataclass(frozen=True)
class KvCapacity:
    """What a serving engine's paged KV cache holds on one replica: the single source of the
    "max concurrent sequences" that ``memory``, ``cost`` and ``plan`` show."""

    budget_bytes_per_gpu: float  # memory the engine hands the cache
    bytes_per_token_per_gpu: float
    block_size: int  # tokens per KV block (page)
    blocks: int
    tokens_per_sequence: int  # prompt + output, the full length an admitted request may reach
    max_sequences: int  # sequences of that length whose blocks fit at once
    gpu_memory_utilization: float
    method: str

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_size

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": self.tokens}


def kv_capacity(
    w: Workload, gpu: GPU, arch: ModelArch | None = None, num: Numerics | None = None
) -> KvCapacity:
    """KV blocks per replica and the sequences of ``seq_len + output_len`` tokens they hold.

    The budget is gpuwise.perf's serving rule (the engine's memory share of the device minus weights,
    context and buffers, from gpuwise.memory's estimate), at the workload's
    ``serving.gpu_memory_utilization`` and engine block size when given.
    """
    from gpuwise.catalog import get_model
    from gpuwise.memory.estimate import gpu_capacity_bytes
    from gpuwise.perf import efficiency as eff
    from gpuwise.perf.footprint import kv_budget_bytes_per_gpu, kv_bytes_per_token_per_gpu
    from gpuwise.perf.numerics import resolve
    from gpuwise.serving.engines import scheduler_config
    from gpuwise.workload.serving import ServingSpec

    arch = arch or get_model(w.model)
    num = num or resolve(w, gpu)
    cfg = scheduler_config(w.serving or ServingSpec())
    default_share = eff.constants().serving.memory_utilization
    budget, method = kv_budget_bytes_per_gpu(w, gpu, arch, num)
    if cfg.gpu_memory_utilization != default_share:
        budget = max(budget + (cfg.gpu_memory_utilization - default_share) * gpu_capacity_bytes(gpu), 0.0)
        method = method.replace(f"{default_share:.2f}", f"{cfg.gpu_memory_utilization:.2f}")
    per_token = kv_bytes_per_token_per_gpu(arch, num, w.tp, w.pp)
    bs = cfg.kv_block_size
    blocks = int(budget // (per_token * bs)) if per_token else 0
    length = w.seq_len + w.output_len
    per_seq_blocks = -(-length // bs)
    return KvCapacity(
        budget, per_token, bs, blocks, length, blocks // per_seq_blocks, cfg.gpu_memory_utilization, method
    )
