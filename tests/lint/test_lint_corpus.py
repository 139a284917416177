"""The linter over look-alikes of public training scripts: exactly the expected findings, no others.

Each file in tests/data/lint reproduces one public script's patterns (named in its first line);
the real scripts were linted by hand when these were written (docs/lint.md, "Precision").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.lint import lint_paths

DATA = Path(__file__).parents[1] / "data" / "lint"

EXPECTED: dict[str, set[tuple[str, int]]] = {
    # periodic .item() under `step % log_every`, GradScaler, require_backward_grad_sync, master-only
    # eval save: all quiet; the end-of-run save has no rank check, torch.load has no weights_only.
    "gpt_char_trainer.py": {
        ("torch_load_unsafe", 26),
        ("deprecated_torch_api", 29),
        ("every_rank_saves", 70),
    },
    # the snapshot save is under `self.local == 0` (quiet); the sampler is never re-seeded.
    "ddp_snapshot_trainer.py": {
        ("torch_load_unsafe", 23),
        ("no_mixed_precision", 30),
        ("loader_no_workers", 48),
        ("sampler_without_set_epoch", 49),
    },
    # optimizer after fully_shard, weights_only, rank-0 save, .cpu() outside the loop: all quiet
    "fsdp2_meta_init.py": set(),
    # the one-batch preview loader in the callback is quiet; self.log(loss) is not a sync.
    "lit_autoencoder.py": {
        ("loader_no_workers", 48),
        ("loader_no_pin_memory", 48),
        ("loader_no_workers", 51),
        ("loader_no_pin_memory", 51),
    },
    "accelerate_glue.py": {
        ("loader_no_workers", 11),
        ("loader_no_pin_memory", 11),
        ("loader_no_workers", 12),
        ("loader_no_pin_memory", 12),
        ("accumulation_without_no_sync", 22),
    },
    # no optimizer.step (manual SGD): no training loop to judge; .item() is under `batch % log_every`.
    "rnn_language_model.py": {("torch_load_unsafe", 39)},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_findings_are_exactly_the_expected_ones(name: str) -> None:
    result = lint_paths([DATA / name])
    assert result.notes == []
    assert {(v.rule, v.line) for v in result.violations} == EXPECTED[name]


def test_corpus_covers_every_file() -> None:
    assert {p.name for p in DATA.glob("*.py")} == set(EXPECTED)
