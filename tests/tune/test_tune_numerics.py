"""The tuner's numerics check on real CPU trials: a window after warm-up, not the first losses from init.

Two look-alikes run under `gpuwise tune` with ``--knob autocast=fp16``: a regression on unnormalized
targets (prices in dollars) whose outputs grow as it trains, so fp16 overflows only once they pass 65,504
(its first losses match fp32's to 0.01 %), and the well-scaled conv net of tune_scripts.NUMERIC, whose
fp16 losses stay within the default 2 %.
"""

from __future__ import annotations

import sys

from gpuwise.diagnose import thresholds as T
from gpuwise.tune.knobs import parse_knob_option
from gpuwise.tune.search import TuneOptions, run_tune
from gpuwise.tune.verify import compare_losses
from tune_scripts import NUMERIC, write

# A linear fit of raw dollar amounts: each SGD step moves the output by ~6,400; past step 8 it exceeds
# fp16's largest finite value (65,504) and the forward under fp16 autocast returns inf.
GROWING = """
import torch
from torch import nn
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Linear(8, 1, bias=False)
opt = torch.optim.SGD(model.parameters(), lr=800.0)
x = torch.rand(64, 8) + 0.5
y = x.sum(dim=1, keepdim=True) * 2e4
for step in range(200):
    loss = nn.functional.l1_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _fp16_trial(tmp_path, source: str, name: str):
    script = write(tmp_path, name, source)
    options = TuneOptions(
        steps=12, warmup=3, repeats=0, auto=False, knobs=[parse_knob_option("autocast=fp16")]
    )
    result = run_tune([sys.executable, str(script)], options)
    by_label = {t.spec.label: t for t in result.trials}
    return by_label["as written"], by_label["autocast=fp16"], options


def test_an_overflow_that_builds_up_after_the_first_steps_is_rejected(tmp_path):
    base, fp16, options = _fp16_trial(tmp_path, GROWING, "growing.py")
    assert base.status == "ok" and len(base.losses) == options.warmup + options.steps
    # the old check (the first 5 losses, step by step) would have accepted it
    first = compare_losses(base.losses[:5], fp16.losses[:5], T.TUNE_LOSS_RTOL, window=5)
    assert first.accepted and (first.max_rel_diff or 0) < 1e-3
    assert fp16.status == "rejected" and " is inf" in (fp16.error or ""), fp16.error


def test_a_well_scaled_model_keeps_fp16_within_the_tolerance(tmp_path):
    base, fp16, _options = _fp16_trial(tmp_path, NUMERIC, "numeric.py")
    assert base.status == "ok" and fp16.status == "ok", fp16.error
    assert fp16.losses != base.losses  # fp16 did change the arithmetic
    note = next(n for n in fp16.notes if "losses within" in n)
    assert "after 3 warm-up" in note
