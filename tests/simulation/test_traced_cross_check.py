"""Analytic and traced estimates agree within 5 % on catalog LLMs (full fine-tune bf16, LoRA, inference).

Short sequences keep the test fast; the fake-tensor run costs the same at any length.
benchmarks/traced_vs_analytic.py prints the same comparison for 1B-8B models at 2048 tokens.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from gpuwise.memory import estimate_memory
from gpuwise.simulation import traced_estimate
from gpuwise.workload import workload_from_mapping

AGREEMENT_PCT = 5.0


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, settings",
    [
        ("llama-3.2-1b", {"task": "full-finetune", "precision": "bf16"}),
        ("llama-3.2-1b", {"task": "lora", "precision": "bf16"}),
        ("llama-3.2-1b", {"task": "inference", "precision": "bf16", "output_len": 64}),
        ("qwen2.5-0.5b", {"task": "lora", "precision": "bf16", "grad_checkpointing": "full"}),
        ("tinyllama-1.1b", {"task": "full-finetune", "precision": "bf16", "batch_size": 2}),
    ],
    ids=lambda v: v if isinstance(v, str) else v["task"],
)
def test_analytic_and_traced_peaks_agree(model, settings):
    w = workload_from_mapping({"model": model, "seq": 512, **settings})
    traced = traced_estimate(w)
    analytic = estimate_memory(w)
    diff_pct = 100 * (analytic.peak_allocated_bytes / traced.peak_allocated_bytes - 1)
    assert abs(diff_pct) <= AGREEMENT_PCT, (
        model,
        settings,
        traced.peak_phase,
        analytic.peak_phase,
        round(diff_pct, 2),
    )
    assert traced.peak_phase == analytic.peak_phase
