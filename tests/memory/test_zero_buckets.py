"""DeepSpeed ZeRO-1/2 gradient buckets: a fixed-size allocation of the optimizer, not of the model."""

from __future__ import annotations

import pytest

from gpuwise.errors import GpuwiseError
from gpuwise.memory import estimate_memory
from gpuwise.workload import workload_from_mapping

# LongLoRA's plain-LoRA baseline (fine-tune.py: r8 on q,k,v,o, bf16, checkpointing; ZeRO-2 on 8 GPUs).
LORA = {
    "model": "llama-2-7b",
    "task": "lora",
    "precision": "bf16",
    "seq_len": 8192,
    "lora_rank": 8,
    "lora_targets": "q,k,v,o",
    "grad_checkpointing": "full",
    "num_gpus": 8,
    "gpu": "a100-80gb-sxm",
}


def _gradients(**changes) -> float:
    e = estimate_memory(workload_from_mapping({**LORA, **changes}))
    return e.phase("optimizer_step").components["gradients"]


def test_zero2_holds_one_default_bucket_and_two_with_overlap_comm():
    # DeepSpeed defaults: reduce_bucket_size 5e8 elements, overlap_comm off below stage 3; bf16 buckets.
    assert _gradients(sharding="zero2") == pytest.approx(5e8 * 2)
    assert _gradients(sharding="zero1") == pytest.approx(5e8 * 2)
    # LongLoRA ds_configs/stage2.json: reduce_bucket_size 1e9, overlap_comm true -> 4e9 bytes
    assert _gradients(sharding="zero2", reduce_bucket_elements=1e9, overlap_comm=True) == pytest.approx(4e9)


def test_the_buckets_are_the_config_size_whatever_the_model_and_only_under_zero_1_2():
    small = _gradients(sharding="zero2", model="llama-3.2-1b")
    assert small == pytest.approx(_gradients(sharding="zero2"))
    assert _gradients(sharding="zero3") == 0.0  # stage 3 partitions its buckets differently
    assert _gradients(sharding="fsdp") == 0.0
    # under optimizer offload the gradients pass through the buckets the offload term already counts
    offload = estimate_memory(workload_from_mapping({**LORA, "sharding": "zero2", "offload": "optimizer"}))
    assert not any("ZeRO gradient buckets" in a for a in offload.assumptions)


def test_the_buckets_live_through_every_phase_and_are_said():
    e = estimate_memory(workload_from_mapping({**LORA, "sharding": "zero2", "overlap_comm": "true"}))
    for phase in e.phases:
        assert phase.components["gradients"] >= 2 * 5e8 * 2
    assert any("2 x reduce_bucket_size 5e+08" in a for a in e.assumptions)


def test_a_bucket_size_that_is_not_a_positive_number_is_refused():
    with pytest.raises(GpuwiseError, match="reduce_bucket_elements"):
        workload_from_mapping({**LORA, "sharding": "zero2", "reduce_bucket_elements": 0})
    with pytest.raises(GpuwiseError, match="reduce_bucket_elements"):
        workload_from_mapping({**LORA, "sharding": "zero2", "reduce_bucket_elements": "many"})
