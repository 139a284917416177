"""What fits: largest batch / context on a GPU, and the fit table over the catalog."""

from __future__ import annotations

import pytest

from gpuwise.catalog import get_gpu, list_gpus
from gpuwise.errors import GpuwiseError
from gpuwise.memory import estimate_memory, fit_table, max_batch_that_fits, max_seq_len_that_fits
from gpuwise.workload import workload_from_mapping


def W(**kw):
    return workload_from_mapping({"model": "llama-3-8b", **kw})


def _fits(w, gpu, headroom):
    e = estimate_memory(w, gpu)
    return e.device_total_bytes <= e.gpu_memory_bytes * (1 - headroom / 100)


@pytest.mark.parametrize("headroom", [10.0, 20.0])
def test_max_batch_is_the_boundary(headroom):
    w, gpu = W(task="lora", seq_len=2048, grad_checkpointing="full"), get_gpu("a100-80gb-sxm")
    n = max_batch_that_fits(w, gpu, headroom_pct=headroom)
    assert n > 1
    assert _fits(w.with_changes(batch_size=n), gpu, headroom)
    assert not _fits(w.with_changes(batch_size=n + 1), gpu, headroom)


def test_more_headroom_never_allows_more():
    w = W(task="lora", grad_checkpointing="full")
    assert max_batch_that_fits(w, headroom_pct=20) <= max_batch_that_fits(w, headroom_pct=10)


def test_max_seq_is_the_boundary_and_capped_by_the_model():
    w, gpu = W(task="inference", batch_size=16, output_len=256), get_gpu("l4")
    n = max_seq_len_that_fits(w, gpu, headroom_pct=10)
    assert 1 < n < 8192 - 256
    assert _fits(w.with_changes(seq_len=n), gpu, 10) and not _fits(w.with_changes(seq_len=n + 1), gpu, 10)
    tiny = workload_from_mapping({"model": "llama-3.2-1b", "task": "inference"})
    assert max_seq_len_that_fits(tiny, get_gpu("b200")) == 131072 - 256  # whole context window minus output


def test_nothing_fits_gives_zero():
    w = workload_from_mapping({"model": "llama-3-70b", "task": "full-finetune"})
    assert max_batch_that_fits(w, get_gpu("t4")) == 0
    assert max_seq_len_that_fits(w, get_gpu("t4")) == 0


def test_headroom_out_of_range_is_refused():
    with pytest.raises(GpuwiseError, match="headroom"):
        max_batch_that_fits(W(task="lora"), headroom_pct=120)


def test_fit_table_rows_fit_and_are_sorted():
    result = fit_table(W(task="lora", batch_size=2))
    # A PyTorch workload is checked on every GPU it can run on: TPUs are named as skipped, in one line.
    pytorch_gpus = [g for g in list_gpus() if not g.is_tpu]
    assert result.rows and result.checked == 4 * len(pytorch_gpus)
    tpus = [g.id for g in list_gpus() if g.is_tpu]
    assert tpus and any(all(t in s for t in tpus) and "pytorch" in s for s in result.skipped)
    keys = [(r.num_gpus, r.gpu_memory_bytes, -r.headroom_pct) for r in result.rows]
    assert keys == sorted(keys)
    for r in result.rows:
        assert r.device_total_bytes <= r.gpu_memory_bytes and r.headroom_pct >= 0
    assert {r.num_gpus for r in result.rows} == {1, 2, 4, 8}


def test_fit_table_multi_gpu_training_assumes_fsdp_and_says_so():
    w = workload_from_mapping({"model": "llama-3-70b", "task": "full-finetune", "grad_checkpointing": "full"})
    result = fit_table(w)
    assert all(r.num_gpus > 1 for r in result.rows)  # 70B full fine-tuning fits on no single GPU
    assert all(r.sharding == "fsdp" and "FSDP" in r.assumed for r in result.rows)
    fewest = min(r.num_gpus for r in result.rows)
    assert result.rows[0].num_gpus == fewest


def test_fit_table_inference_uses_tensor_parallel():
    result = fit_table(workload_from_mapping({"model": "llama-3-70b", "task": "inference"}), counts=(2, 4))
    assert result.rows and all(r.tp == r.num_gpus for r in result.rows)


def test_fit_table_keeps_the_workloads_own_layout():
    w = W(task="full-finetune", num_gpus=2, sharding="zero2")
    result = fit_table(w, counts=(2, 4))
    assert all(r.sharding == "zero2" for r in result.rows)


def test_fit_table_min_headroom_filters():
    w = W(task="lora", batch_size=2)
    loose, strict = fit_table(w, counts=(1,)), fit_table(w, counts=(1,), min_headroom_pct=30)
    assert len(strict.rows) < len(loose.rows)
    assert all(r.headroom_pct >= 30 for r in strict.rows)


def test_fit_table_places_a_jax_workload_on_tpus_per_chip():
    """--framework jax: TPUs join the table, fitted per chip against their HBM (v5e 16 GB, v6e 32 GB)."""
    result = fit_table(
        W(task="inference", framework="jax", seq_len=1024, output_len=128), min_headroom_pct=10
    )
    on_tpu = {(r.gpu, r.num_gpus) for r in result.rows if get_gpu(r.gpu).is_tpu}
    assert ("tpu-v6e", 1) in on_tpu and ("tpu-v5p", 1) in on_tpu
    assert ("tpu-v5e", 1) not in on_tpu  # 8B bf16 weights alone are 16 GB: no 10 % left on a v5e chip
    assert ("tpu-v5e", 2) in on_tpu  # split over two chips it fits
    assert not any("tpu" in s for s in result.skipped)
    assert not any(r.gpu == "gaudi3" for r in result.rows)  # Gaudi runs PyTorch, not JAX
