"""Memory model gaps users hit: offload, compile and chunked loss, expert/context parallelism, FP4,
library-release effects and the FSDP allocator reserve (each against a hand-computed value)."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest

from conftest import run_cli
from gpuwise.catalog import get_gpu, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.memory import estimate_memory, overheads
from gpuwise.memory.activations import layer_activations, logits_bytes
from gpuwise.memory.frameworks import profile_for, profile_for_workload
from gpuwise.memory.regime import regime_for
from gpuwise.memory.weights import FP4_BYTES, fp4_format_for, param_groups
from gpuwise.units import GiB
from gpuwise.workload import workload_from_mapping

MEASURED = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "measured_memory.csv"


def W(**kw):
    return workload_from_mapping({"model": "llama-3.2-3b", **kw})


# ---- torch.compile and chunked cross-entropy -------------------------------------------------------


def test_compile_fuses_the_norms_and_the_swiglu_product():
    arch = get_model("llama-3.2-3b")
    eager = W(task="full-finetune", framework="torchtune", torch_compile=False)
    compiled = W(task="full-finetune", framework="torchtune", torch_compile=True)
    h, i, t = arch.hidden_size, arch.intermediate_size, 2 * 4096

    def saved(w):
        return layer_activations(arch, w, regime_for(w), profile_for_workload(w), 2, 4096).saved_bytes

    # Each norm keeps its 16-bit input, not an fp32 copy and the normed output; SiLU*mul drops silu(gate).
    per_token = 2 * (4 * h + 2 * h - 2 * h) + 2 * i
    assert saved(eager) - saved(compiled) == pytest.approx(per_token * t)


def test_chunked_loss_follows_the_framework_its_release_and_the_workload():
    arch = get_model("llama-3.2-3b")
    t_vocab = 2 * 4096 * arch.vocab_size

    def per_logit(**kw):
        w = W(task="full-finetune", **kw)
        fwd, bwd = logits_bytes(arch, w, regime_for(w), profile_for_workload(w), 2, 4096)
        return fwd / t_vocab, bwd / t_vocab

    assert per_logit(framework="torchtune") == (6.0, 7.0)  # CEWithChunkedOutputLoss: fp32 per chunk
    assert per_logit(framework="torchtune", torch_compile=True) == (
        4.0,
        5.0,
    )  # the upcast fuses into the loss
    assert per_logit(framework="torchtune", library_versions=("torchtune==0.2",)) == (10.0, 12.0)
    assert per_logit(framework="torchtune", chunked_loss=False) == (10.0, 12.0)
    assert per_logit(framework="hf", chunked_loss=True) == (6.0, 7.0)


# ---- library releases and framework profiles ---------------------------------------------------------


def test_old_transformers_ran_eager_attention_and_its_own_adamw():
    new = estimate_memory(W(task="full-finetune", seq_len=1024))
    old = estimate_memory(W(task="full-finetune", seq_len=1024, library_versions=("transformers==4.30",)))
    assert any("eager attention" in a for a in old.assumptions)
    assert old.phase("optimizer_step").components.get("temporaries", 0.0) == 0.0  # no foreach sqrt(v) list
    assert new.phase("optimizer_step").components["temporaries"] > 1 * GiB
    assert not profile_for("hf", ("transformers==4.21",)).grads_set_to_none  # predates torch 2.0


def test_accelerated_peft_fuses_lora_on_one_gpu_but_not_under_fsdp():
    one = W(task="qlora", framework="fms-accelerated-peft")
    two = W(task="qlora", framework="fms-accelerated-peft", num_gpus=2, sharding="fsdp")
    assert profile_for_workload(one).quant_backend == "unsloth"
    assert profile_for_workload(two).quant_backend == "bitsandbytes"
    assert profile_for_workload(two).kbit_upcast == profile_for("hf").kbit_upcast


# ---- offload ------------------------------------------------------------------------------------------


def test_optimizer_offload_moves_state_master_and_gradients_to_the_host():
    base = dict(model="llama-3-8b", task="full-finetune", num_gpus=2, sharding="zero2", gpu="a100-80gb-sxm")
    on_gpu = estimate_memory(workload_from_mapping(base))
    off = estimate_memory(workload_from_mapping({**base, "offload": "optimizer"}))
    step = off.phase("optimizer_step").components
    assert step.get("optimizer_states", 0.0) == step.get("master_weights", 0.0) == 0.0
    bucket = 2 * 5e8 * 2  # two 16-bit reduce buckets of DeepSpeed's default 5e8 elements
    assert step["gradients"] == pytest.approx(bucket)
    n = param_groups(get_model("llama-3-8b")).total
    moved = on_gpu.phase("optimizer_step").allocated_bytes - off.phase("optimizer_step").allocated_bytes
    # fp32 Adam moments (8) + fp32 master (4) + the foreach step temporary (4) + 16-bit and fp32
    # gradients (2 + 4), each sharded over the 2 ranks, and the on-GPU run's one ZeRO-2 bucket (5e8 16-bit
    # elements), minus the two buckets that stay
    assert moved == pytest.approx(n * (8 + 4 + 4 + 2 + 4) / 2 + 5e8 * 2 - bucket, rel=1e-6)
    assert any("CPU memory" in note for note in off.notes)


def test_parameter_offload_keeps_only_the_gathered_layers():
    base = dict(model="llama-3-8b", task="full-finetune", num_gpus=4, sharding="fsdp", gpu="a100-80gb-sxm")
    on_gpu = estimate_memory(workload_from_mapping(base))
    off = estimate_memory(workload_from_mapping({**base, "offload": "params"}))
    assert off.phase("optimizer_step").components.get("weights", 0.0) == 0.0
    resident = on_gpu.breakdown["weights"] + on_gpu.breakdown["optimizer_states"]
    assert on_gpu.device_total_bytes - off.device_total_bytes >= resident


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"offload": "params", "sharding": "zero2"}, "needs sharding fsdp"),
        ({"offload": "optimizer"}, "ZeRO-Offload"),
        ({"task": "inference", "offload": "optimizer", "sharding": "none"}, "applies to training"),
    ],
)
def test_offload_settings_that_cannot_run_are_refused(changes, words):
    with pytest.raises(GpuwiseError, match=words):
        W(**{"task": "full-finetune", "num_gpus": 2, **changes})


# ---- expert and context parallelism -----------------------------------------------------------------


def test_expert_parallel_splits_unsharded_experts_and_leaves_fsdp_shards_alone():
    arch = get_model("mixtral-8x7b")
    counts = arch.param_counts()
    experts = counts.num_layers * (counts.per_layer_mlp - arch.hidden_size * arch.num_experts)
    base = dict(model="mixtral-8x7b", task="inference", num_gpus=8, tp=8, gpu="h100-sxm")
    # inference: no data parallel to carve experts from, so a training layout is used
    train = dict(model="mixtral-8x7b", task="full-finetune", num_gpus=8, gpu="h100-sxm")
    ddp = estimate_memory(workload_from_mapping({**train, "sharding": "ddp"}))
    ep = estimate_memory(workload_from_mapping({**train, "sharding": "ddp", "expert_parallel": 8}))
    w_ddp, w_ep = ddp.phase("optimizer_step").components, ep.phase("optimizer_step").components
    assert w_ddp["weights"] - w_ep["weights"] == pytest.approx(experts * 2 * 7 / 8)
    fsdp = estimate_memory(workload_from_mapping({**train, "sharding": "fsdp"}))
    fsdp_ep = estimate_memory(workload_from_mapping({**train, "sharding": "fsdp", "expert_parallel": 8}))
    assert fsdp.phase("optimizer_step").components["weights"] == pytest.approx(
        fsdp_ep.phase("optimizer_step").components["weights"]
    )
    with pytest.raises(GpuwiseError, match="MoE"):
        workload_from_mapping({**base, "model": "llama-3-8b", "tp": 1, "expert_parallel": 2})


def test_context_parallel_splits_each_sequence():
    one = W(task="full-finetune", seq_len=8192, num_gpus=2, sharding="fsdp")
    two = W(task="full-finetune", seq_len=8192, num_gpus=2, sharding="fsdp", context_parallel=2)
    assert (one.data_parallel, two.data_parallel) == (2, 1)
    a1, a2 = estimate_memory(one), estimate_memory(two)
    fwd1, fwd2 = a1.phase("forward").components, a2.phase("forward").components
    assert fwd2["logits_loss"] == pytest.approx(fwd1["logits_loss"] / 2)
    assert fwd2["activations"] < 0.55 * fwd1["activations"]
    with pytest.raises(GpuwiseError, match="context_parallel"):
        W(task="full-finetune", num_gpus=2, context_parallel=4)


# ---- FP4 ----------------------------------------------------------------------------------------------


def test_fp4_weights_are_block_scaled_on_blackwell_and_refused_elsewhere():
    w = workload_from_mapping({"model": "llama-3-8b", "precision": "nvfp4", "gpu": "b200"})
    g = param_groups(get_model("llama-3-8b"))
    # NVFP4: 4-bit values + one FP8 E4M3 scale per 16; embeddings, norms and lm_head stay 16-bit
    expected = g.block_matrices * (0.5 + 1 / 16) + (g.total - g.block_matrices) * 2
    assert estimate_memory(w).phase("decode").components["weights"] == pytest.approx(expected)
    assert FP4_BYTES[fp4_format_for("AMD")] == 0.5 + 1 / 32  # MXFP4: an E8M0 scale per 32
    with pytest.raises(GpuwiseError, match="FP4 tensor cores"):
        estimate_memory(w, get_gpu("h100-sxm"))


def test_fp4_on_a_gpu_without_fp4_is_one_clear_line():
    bad = run_cli("memory", "-m", "llama-3-8b", "-p", "fp4", "-g", "h100-sxm")
    assert bad.exit_code == 2
    assert "FP4 tensor cores" in bad.stderr and "Traceback" not in bad.stderr
    good = run_cli("memory", "-m", "llama-3-8b", "-p", "fp4", "-g", "b200", "--json")
    assert good.exit_code == 0, good.stderr


# ---- the FSDP allocator reserve is measured, not guessed ----------------------------------------------


def _fsdp_reserve_ratios() -> list[float]:
    """(nvidia-smi − torch max allocated − context − NCCL) / transient working set, per published FSDP run."""
    import importlib.util
    import sys

    script = MEASURED.parents[1] / "validate_memory.py"
    spec = importlib.util.spec_from_file_location("validate_memory", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules["validate_memory"] = module
    spec.loader.exec_module(module)
    rows = {r["id"]: r for r in csv.DictReader(MEASURED.open(encoding="utf-8"))}
    ratios = []
    for row_id, row in rows.items():
        alloc = rows.get(row_id.replace("-nvml", "-max_allocated"))
        if not row_id.endswith("-nvml") or alloc is None:
            continue
        w = workload_from_mapping(module.row_to_mapping(row)[0])
        if not (w.sharding == "fsdp" and w.data_parallel > 1):
            continue
        e = estimate_memory(w)
        transient = max(
            p.components.get("logits_loss", 0) + p.components.get("temporaries", 0) for p in e.phases
        )
        nvml = float(row["measured_value"]) * 2**20  # MiB
        allocated = float(alloc["measured_value"]) * 1e9  # GB
        fixed = overheads.cuda_context_bytes() + overheads.nccl_bytes(w.num_gpus)
        ratios.append((nvml - allocated - fixed) / transient)
    return ratios


def test_fsdp_reserve_fraction_is_the_median_of_published_fsdp_runs():
    ratios = _fsdp_reserve_ratios()
    assert len(ratios) == 8
    loo = [statistics.median(ratios[:i] + ratios[i + 1 :]) for i in range(len(ratios))]
    assert min(loo) - 0.02 <= overheads.RESERVE_FRACTION_SHARDED <= max(loo) + 0.02


# ---- the planner proposes offload once cheaper memory techniques are not enough ----------------------


def test_plan_offloads_a_sharded_full_finetune_after_checkpointing():
    from gpuwise.plan import make_plan

    w = workload_from_mapping(
        {
            "model": "llama-3-70b",
            "task": "full-finetune",
            "num_gpus": 8,
            "sharding": "fsdp",
            "gpu": "a100-80gb-sxm",
        }
    )
    ids = [t.id for t in make_plan(w).recommended]
    assert "offload" in ids and "grad_checkpointing" in ids
    assert ids.index("grad_checkpointing") < ids.index("offload")


def _torchtune_qlora(torchao: str, **extra) -> dict:
    return {
        "model": "llama-2-7b",
        "task": "qlora",
        "precision": "nf4",
        "double_quant": True,
        "lora_rank": 8,
        "lora_targets": "q,k,v,o,mlp",
        "batch_size": 2,
        "seq_len": 1304,
        "grad_checkpointing": "full",
        "framework": "torchtune",
        "library_versions": [f"torchao=={torchao}", "torchtune==0.2"],
        **extra,
    }


def test_torchao_01_quantizes_whole_matrices_at_load_and_the_allocator_keeps_the_blocks():
    old = estimate_memory(workload_from_mapping(_torchtune_qlora("0.1")))
    new = estimate_memory(workload_from_mapping(_torchtune_qlora("0.2")))
    load_old, load_new = old.phase("load"), new.phase("load")
    mlp = 11008 * 4096  # Llama-2-7B's largest quantized matrix
    # bf16 source + scaled copy + (value - nf4) and its abs, 16 levels each: 68 bytes per element
    assert load_old.components["temporaries"] == pytest.approx(68 * mlp)
    # torchao >= 0.2: source, scaled copy, uint8 indices and packed halves (6 B), comparisons per 2^20 chunk
    assert load_new.components["temporaries"] == pytest.approx(6 * mlp + 2**20 * (64 + 8))
    assert load_old.components["weights"] == old.phase("forward").components["weights"]
    # The torchtune QLoRA tutorial (PR #693, Apr 2024, torchao 0.1): 9.13 GB reserved after model init.
    assert old.peak_reserved_bytes == pytest.approx(9.13e9, rel=0.05)
    assert old.peak_phase == "load" and new.peak_phase != "load"
    assert new.peak_reserved_bytes < old.peak_reserved_bytes


def test_only_torchtune_quantizes_on_the_gpu_at_load():
    hf = estimate_memory(workload_from_mapping({**_torchtune_qlora("0.1"), "framework": "hf"}))
    lora = estimate_memory(
        workload_from_mapping(
            {**_torchtune_qlora("0.1"), "task": "lora", "precision": "bf16", "double_quant": False}
        )
    )
    assert "load" not in [p.name for p in hf.phases + lora.phases]
