"""The caching-allocator replay behind a variable-length run's reserved memory (gpuwise.memory.allocator)."""

from __future__ import annotations

import pytest

from gpuwise.catalog import get_model
from gpuwise.errors import GpuwiseError
from gpuwise.memory import estimate_memory, gpu_capacity_bytes
from gpuwise.memory.allocator import record_lengths, step_shape, variable_length_factor
from gpuwise.units import GiB
from gpuwise.workload import workload_from_mapping

# ms-swift Benchmark.md's dataset (cls-fudan-news-zh): 4959 samples of 3234.4 +- 2547.5 tokens.
SWIFT = {
    "sample_tokens_mean": 3234.4,
    "sample_tokens_std": 2547.5,
    "run_samples": 4959,
    "over_length": "drop",
}
LORA = {"model": "qwen2.5-7b", "task": "lora", "grad_checkpointing": "full", "gpu": "a100-80gb-sxm"}


def test_records_rise_to_the_cap_and_are_reproducible():
    dropped = record_lengths(3234.4, 2547.5, 2048, 4959, over_length="drop", seed=3)
    assert dropped == sorted(dropped) and dropped[-1] <= 2048 and len(dropped) >= 3
    assert dropped == record_lengths(3234.4, 2547.5, 2048, 4959, over_length="drop", seed=3)
    # cut to the cap instead: most samples are longer than 512 tokens, so the run soon hits the cap
    assert record_lengths(3234.4, 2547.5, 512, 4959, over_length="truncate", seed=3)[-1] == 512


def test_a_longer_step_strands_the_shorter_steps_segments():
    shape = step_shape(get_model("qwen2.5-7b"), workload_from_mapping(LORA))
    assert variable_length_factor(shape, ((2048,),), 1) == 1.0  # one length: one step's reserve
    assert variable_length_factor(shape, ((2048, 2048),), 1) == 1.0  # a repeat reuses its blocks
    grown = variable_length_factor(shape, ((1024, 1536, 2048),), 1)
    # the 1,024 and 1,536 steps' blocks are too small for the 2,048 step's largest tensors; some serve its
    # smaller ones, so the reserve is below the no-reuse bound (1,024 + 1,536 + 2,048) / 2,048 = 2.25
    assert 1.2 < grown < 2.25


def test_a_variable_length_run_reserves_more_than_a_fixed_one_and_allocates_the_same():
    fixed = estimate_memory(workload_from_mapping({**LORA, "seq_len": 2048}))
    varied = estimate_memory(workload_from_mapping({**LORA, "seq_len": 2048, **SWIFT}))
    assert varied.peak_allocated_bytes == fixed.peak_allocated_bytes
    assert varied.peak_reserved_bytes > fixed.peak_reserved_bytes + 2 * GiB
    assert any("variable-length run" in n for n in varied.notes)
    assert not any("variable-length run" in n for n in fixed.notes)


def test_reserved_memory_stops_at_the_device():
    # ms-swift's batch-8 row: one step fits (about 40 GiB), the run's record lengths would reserve more than
    # the GPU; a failed cudaMalloc frees the cached segments and retries, so reserved stops at the device
    big = estimate_memory(workload_from_mapping({**LORA, "seq_len": 2048, "batch_size": 8, **SWIFT}))
    assert big.peak_allocated_bytes < 0.6 * gpu_capacity_bytes(big.gpu)
    assert big.peak_allocated_bytes < big.peak_reserved_bytes <= gpu_capacity_bytes(big.gpu)


def test_a_bad_over_length_names_the_choices():
    with pytest.raises(GpuwiseError, match=r"over_length.*truncate"):
        workload_from_mapping({**LORA, "over_length": "cut"})


def test_records_drawn_top_down_are_a_random_orders_records():
    # In a random order of N distinct values the i-th largest sets a record with probability 1/i: the expected
    # number of records is the harmonic number H_N (7.485 for N = 1,000). With no cap reached (a cap far above
    # every sample) each record is a distinct length, so the mean count over many orders must approach H_N.
    counts = [len(record_lengths(3234.4, 2547.5, 10**9, 1000, seed=seed)) for seed in range(2000)]
    harmonic = sum(1.0 / i for i in range(1, 1001))
    assert abs(sum(counts) / len(counts) - harmonic) < 0.15


def test_the_replay_keeps_what_the_block_walk_keeps():
    from gpuwise.memory.activations import layer_activations
    from gpuwise.memory.frameworks import profile_for_workload
    from gpuwise.memory.regime import regime_for

    arch = get_model("qwen2.5-7b")
    for attention in ("sdpa", "eager"):
        w = workload_from_mapping(
            {**LORA, "seq_len": 1024, "attention": attention, "grad_checkpointing": "none"}
        )
        shape = step_shape(arch, w)
        walk = layer_activations(arch, w, regime_for(w), profile_for_workload(w), 1, 1024)
        per_layer = 1024 * (
            sum(shape.saved_attention) + sum(shape.saved_mlp) + 1024 * sum(shape.saved_scores)
        )
        # the block input itself, where a norm keeps it, is the layer input the replay keeps anyway
        block_input = 2.0 * 1024 * arch.hidden_size
        assert walk.saved_bytes - per_layer in (pytest.approx(0.0, abs=1.0), pytest.approx(block_input))
        assert bool(shape.saved_scores) == (attention == "eager")


class _ReferencePool:
    """The straightforward replay the fast pool must equal: one object per block, best fit over a sorted
    free list, ties to the earlier-created block (a merge keeps the left block), as the allocator module
    replayed it before its blocks became list indices."""

    class Block:
        def __init__(self, size: int, serial: int) -> None:
            self.size, self.serial, self.free = size, serial, True
            self.prev: _ReferencePool.Block | None = None
            self.next: _ReferencePool.Block | None = None

    def __init__(self) -> None:
        self.free: list = []
        self.reserved = self.created = 0

    def _new(self, size: int):
        self.created += 1
        return self.Block(size, self.created)

    def malloc(self, nbytes: float):
        from gpuwise.memory.allocator import SMALL_SIZE_BYTES, _round, _segment

        n = _round(nbytes)
        fits = [b for b in self.free if b.size >= n]
        if fits:
            b = min(fits, key=lambda x: (x.size, x.serial))
            self.free.remove(b)
        else:
            b = self._new(_segment(n))
            self.reserved += b.size
        if b.size - n > SMALL_SIZE_BYTES:
            tail = self._new(b.size - n)
            tail.prev, tail.next = b, b.next
            if b.next:
                b.next.prev = tail
            b.next, b.size = tail, n
            self.free.append(tail)
        b.free = False
        return b

    def release(self, b) -> None:
        b.free = True
        if b.prev is not None and b.prev.free:
            self.free.remove(b.prev)
            b = self._join(b.prev, b)
        if b.next is not None and b.next.free:
            self.free.remove(b.next)
            b = self._join(b, b.next)
        self.free.append(b)

    @staticmethod
    def _join(left, right):
        left.size += right.size
        left.next = right.next
        if right.next:
            right.next.prev = left
        return left


@pytest.mark.parametrize(
    ("extra", "runs"),
    [
        ({}, [(700, 1024, 2048), (2048,), (512, 513, 2047, 2048)]),
        ({"grad_checkpointing": "none", "attention": "eager"}, [(300, 900, 1024)]),
        ({"batch_size": 3, "model": "llama-3.2-1b", "task": "full"}, [(100, 1000, 1700, 4096)]),
    ],
)
def test_the_fast_replay_equals_a_straightforward_one(extra, runs):
    from gpuwise.memory import allocator

    w = workload_from_mapping({**LORA, "seq_len": 4096, **extra})
    shape = step_shape(get_model(w.model), w)
    for lengths in runs:
        fast, ref = allocator._Pool(), _ReferencePool()
        for length in lengths:  # every step's reserve must match, not just the run's
            fast.run(*allocator._program(shape, length * w.batch_size, length))
            allocator._step(ref, shape, length * w.batch_size, length)
            assert fast.peak == ref.reserved
            assert [key >> allocator._INDEX_BITS for key in fast.free] == sorted(b.size for b in ref.free)
