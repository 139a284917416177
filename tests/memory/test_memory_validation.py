"""Regression guard: the estimator against published measurements (benchmarks/validate_memory.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from gpuwise.memory.frameworks import profile_for

REPO = Path(__file__).resolve().parents[2]

SCRIPT = REPO / "benchmarks" / "validate_memory.py"
LOSO_P90_CEILING_PCT = 10.0  # Answer.AI FSDP/DDP (Q)LoRA rows: 17.7 before any change, 8.7 after
COLUMNS = [
    "id",
    "model",
    "task",
    "batch_size",
    "seq_len",
    "grad_accum",
    "precision",
    "optimizer",
    "grad_checkpointing",
    "lora_rank",
    "lora_targets",
    "num_gpus",
    "sharding",
    "gpu",
    "metric",
    "measured_value",
    "unit",
    "framework",
    "source",
    "quality",
    "notes",
]


def run(data) -> tuple[str, dict]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(data)], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads(proc.stdout.strip().splitlines()[-1])


def test_dev_set_meets_the_targets():
    out, summary = run(REPO / "benchmarks" / "data" / "measured_memory.csv")
    assert summary["rows"] == 106
    assert summary["skipped"] <= summary["rows"] / 3
    assert summary["median_abs_err_pct"] <= 5.0  # issue #13's target
    assert summary["p90_abs_err_pct"] <= 15.0  # issue #13's target
    # impossible setups and rows their source contradicts put back in
    assert summary["with_excluded_setups"]["p90_abs_err_pct"] <= 19.0
    assert "clean rows" in out and "approximate rows" in out and "skipped" in out
    assert "worst 10 rows and why:" in out and "FSDP LoRA/QLoRA" in out


def test_leave_one_source_out_is_the_headline_with_the_held_out_publications():
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    loso = summary["leave_one_source_out"]
    assert "leave-one-source-out" in proc.stdout and "* modelscope/ms-swift" in proc.stdout
    held_out = {k for k, v in loso["per_source"].items() if v["held_out"]}
    assert held_out == {"AnswerDotAI/fsdp_qlora", "QwenLM/Qwen", "modelscope/ms-swift"}
    assert summary["rows"] == 106 + 63
    per_source = loso["per_source"]
    # every source but ms-swift together meets the 15 % p90
    assert per_source["modelscope/ms-swift"]["without_p90_abs_err_pct"] <= 15.0
    # ms-swift's variable-length runs, with the caching allocator's record-length segments modelled
    # (gpuwise.memory.allocator): own median 28.1 % before, every source's rest p90 up to 32.6 % before
    assert per_source["modelscope/ms-swift"]["median_abs_err_pct"] <= 10.0
    # the replay keeps the estimate's own per-layer tensors (eager scores, no checkpointing) and Qwen v1's
    # 16-bit scores: ms-swift's own p90 25.6 % and the worst rest p90 17.7 % before, 16.3 % and 16.4 % after
    assert per_source["modelscope/ms-swift"]["p90_abs_err_pct"] <= 17.5
    # DeepSpeed ZeRO-2 gradient buckets (LongLoRA -25.9 -> -10.4 %) and OpenBuddy-Zephyr's 36,608-token
    # vocabulary: the worst rest p90 16.4 -> 16.3 %, all rows 15.8 -> 14.95 %; LLaMA-Factory's own QLoRA
    # preparation (no peft k-bit upcast): the HF 4-bit row +16.5 -> -4.2 %, worst rest p90 16.3 -> 16.1 %,
    # every other source's rest p90 now <= 15 %
    assert max(v["without_p90_abs_err_pct"] for v in per_source.values()) <= 16.2
    assert sorted(v["without_p90_abs_err_pct"] for v in per_source.values())[-2] <= 15.0
    assert summary["p90_abs_err_pct"] <= 14.6
    assert per_source["QwenLM/Qwen"]["p90_abs_err_pct"] <= 15.0  # held out, loss on 16-bit logits
    assert per_source["AnswerDotAI/fsdp_qlora"]["p90_abs_err_pct"] <= LOSO_P90_CEILING_PCT


def test_any_csv_with_the_same_columns_and_every_unit(tmp_path):
    # Llama-2-7B bf16 generation in LitGPT: weights 13.48 GB + a small KV cache; the same value in four units.
    base = {
        "model": "llama-2-7b",
        "task": "inference",
        "batch_size": "1",
        "seq_len": "56",
        "grad_accum": "1",
        "precision": "bf16",
        "optimizer": "none",
        "grad_checkpointing": "no",
        "num_gpus": "1",
        "sharding": "none",
        "gpu": "a100-40gb-sxm",
        "metric": "max_allocated",
        "framework": "litgpt",
        "source": "test",
        "quality": "clean",
        "notes": "max_new_tokens 50",
    }
    rows = [
        {**base, "id": "gb", "measured_value": "13.52", "unit": "GB"},
        {**base, "id": "gib", "measured_value": str(13.52e9 / 2**30), "unit": "GiB"},
        {**base, "id": "mb", "measured_value": "13520", "unit": "MB"},
        {**base, "id": "mib", "measured_value": str(13.52e9 / 2**20), "unit": "MiB"},
        {**base, "id": "skip", "measured_value": "1", "unit": "GB", "metric": "watts"},
    ]
    path = tmp_path / "mine.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    out, summary = run(path)
    assert summary["rows"] == 5 and summary["skipped"] == 1
    assert summary["median_abs_err_pct"] < 2  # all four units agree with the measurement
    assert "skip: unknown metric 'watts'" in out


def _validator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("validate_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["validate_memory"] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


# One CSV row of a Llama-2-7B QLoRA step; tests change the columns they are about.
ROW = {
    "id": "x",
    "model": "llama-2-7b",
    "task": "qlora",
    "batch_size": "1",
    "seq_len": "512",
    "precision": "nf4",
    "optimizer": "adamw",
    "grad_checkpointing": "no",
    "num_gpus": "1",
    "framework": "hf-trainer",
    "notes": "",
}


def test_rows_are_estimated_with_the_libraries_of_their_time():
    v = _validator()
    base = ROW
    dated, _ = v.row_to_mapping({**base, "source": "some table (Oct 2023)"})
    assert dated["library_versions"] == [
        "bitsandbytes==0.43.1",
        "torchao==0.1",
        "torchtune==0.2",
        "transformers==4.35",  # the oldest of its later changes (SDPA default in 4.36) decides
    ]
    stated, _ = v.row_to_mapping(
        {**base, "source": "docs transformers v4.21.0", "notes": "FlashAttention-2, transformers v4.50"}
    )
    assert stated["library_versions"] == ["transformers==4.21.0"]  # from the source column only
    assert stated["attention"] == "flash"
    old = profile_for("hf", stated["library_versions"])
    assert not old.grads_set_to_none  # transformers 4.21 predates torch 2.0: the library infers torch 1.13
    assert not old.sdpa_default and not old.optimizer_foreach
    undated, _ = v.row_to_mapping({**base, "source": "a README"})
    assert "library_versions" not in undated  # current releases
    litgpt, _ = v.row_to_mapping({**base, "source": "a README", "framework": "litgpt"})
    assert litgpt["library_versions"] == [
        "bitsandbytes==0.41.0"
    ]  # what LitGPT pinned for its published tables


def test_a_setup_that_cannot_fit_its_gpu_is_excluded_but_still_counted(tmp_path):
    # A 7B bf16 LoRA at 8 x 4096 tokens without checkpointing needs far more than a 24 GB RTX 4090, yet the
    # row says it ran there: the stated setup is not what ran, so the row is excluded with the reason, and
    # the summary's with-excluded figures put it back in.
    base = {
        "model": "llama-2-7b",
        "task": "lora",
        "batch_size": "1",
        "seq_len": "512",
        "grad_accum": "1",
        "precision": "bf16",
        "optimizer": "adamw",
        "grad_checkpointing": "no",
        "lora_rank": "8",
        "lora_targets": "q,v",
        "num_gpus": "1",
        "sharding": "none",
        "gpu": "rtx-4090",
        "metric": "max_allocated",
        "unit": "GB",
        "framework": "torchtune",
        "quality": "clean",
        "notes": "",
    }
    rows = [
        {**base, "id": "fits", "measured_value": "15.0", "source": "paper-a"},
        {
            **base,
            "id": "impossible",
            "batch_size": "8",
            "seq_len": "4096",
            "measured_value": "16.0",
            "source": "b",
        },
    ]
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    out, summary = run(path)
    assert summary["skipped"] == 1
    flat = " ".join(out.split())  # the report wraps long reasons
    assert "impossible: the stated setup needs" in flat and "cannot be what was measured" in flat
    assert summary["with_excluded_setups"]["rows"] == 2
    assert summary["with_excluded_setups"]["p90_abs_err_pct"] > summary["p90_abs_err_pct"]
    assert summary["leave_one_source_out"]["sources"] == 1  # only the modelled row's source remains
    assert summary["leave_one_source_out"]["p90_abs_err_pct_range"] is None  # nothing left without it


def test_a_row_its_source_contradicts_is_skipped_with_the_reason_and_counted_when_put_back():
    v = _validator()
    row = {
        **ROW,
        "task": "lora",
        "precision": "bf16",
        "metric": "max_allocated",
        "measured_value": "30",
        "unit": "GB",
        "source": "a README",
        "quality": "approximate",
        "notes": "CONTRADICTORY SOURCE: the same table runs it faster on a slower GPU: settings unknown.",
    }
    (result,) = v.evaluate([row])
    assert result.estimated_bytes is None and result.excluded_estimate_bytes
    assert (
        result.skip_reason
        == "the source contradicts its stated setup (the same table runs it faster on a slower GPU)"
    )
    summary = v.summary([result])
    assert summary["median_abs_err_pct"] is None and summary["with_excluded_setups"]["rows"] == 1
