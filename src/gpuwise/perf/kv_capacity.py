"""How much KV cache a serving engine's paged cache holds on one replica, and for how many sequences.

The single source of the "max concurrent sequences" that ``memory``, ``cost``, ``plan`` and the serving
simulator show. It lives in ``perf`` (not ``memory``) because its budget is the speed model's serving rule
(``footprint.kv_budget_bytes_per_gpu``, in the resolved numerics); ``perf.inference`` caps its decode
batch with it, so it cannot live above ``perf``. The engine's block size and memory share come from
``gpuwise.workload.engine_defaults``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuwise.catalog import GPU, ModelArch, get_model
from gpuwise.memory.estimate import gpu_capacity_bytes
from gpuwise.perf import efficiency as eff
from gpuwise.perf.footprint import kv_budget_bytes_per_gpu, kv_bytes_per_token_per_gpu
from gpuwise.perf.numerics import Numerics, resolve
from gpuwise.workload import Workload
from gpuwise.workload.engine_defaults import resolved_gpu_memory_utilization, resolved_kv_block_size
from gpuwise.workload.serving import ServingSpec

__all__ = ["KvCapacity", "kv_capacity"]


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
        """Tokens the cache holds in all: blocks × block size."""
        return self.blocks * self.block_size

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``serving.kv_capacity`` of ``memory``/``cost``): the fields plus ``tokens``."""
        return {**asdict(self), "tokens": self.tokens}


def kv_capacity(
    w: Workload, gpu: GPU, arch: ModelArch | None = None, num: Numerics | None = None
) -> KvCapacity:
    """KV blocks per replica and the sequences of ``seq_len + output_len`` tokens they hold.

    The budget is gpuwise.perf's serving rule (the engine's memory share of the device minus weights,
    context and buffers, from gpuwise.memory's estimate), at the workload's
    ``serving.gpu_memory_utilization`` and engine block size when given.
    """
    arch = arch or get_model(w.model)
    num = num or resolve(w, gpu)
    spec = w.serving or ServingSpec()
    share, bs = resolved_gpu_memory_utilization(spec), resolved_kv_block_size(spec)
    default_share = eff.constants().serving.memory_utilization
    budget, method = kv_budget_bytes_per_gpu(w, gpu, arch, num)
    if share != default_share:
        budget = max(budget + (share - default_share) * gpu_capacity_bytes(gpu), 0.0)
        method = method.replace(f"{default_share:.2f}", f"{share:.2f}")
    per_token = kv_bytes_per_token_per_gpu(arch, num, w.tp, w.pp)
    blocks = int(budget // (per_token * bs)) if per_token else 0
    length = w.seq_len + w.output_len
    per_seq_blocks = -(-length // bs)
    return KvCapacity(budget, per_token, bs, blocks, length, blocks // per_seq_blocks, share, method)
