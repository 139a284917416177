"""Issue 11 item 3: data loading outside a DataLoader. A custom get_batch (numpy memmap, as nanoGPT's)
is measured as its own phase (``host_input``) and read by ``input_bound``; host time elsewhere between
phases is ``other``, and a large share of it is a finding naming the sampled frames."""

from __future__ import annotations

import re
import subprocess
import sys

from gpuwise.diagnose import Evidence, diagnose
from gpuwise.diagnose import thresholds as T
from gpuwise.profile.phases import (
    BACKWARD_IN,
    BACKWARD_OUT,
    FORWARD_IN,
    FORWARD_OUT,
    OPTIMIZER_IN,
    OPTIMIZER_OUT,
    STEP,
    SYNC,
    PhaseTimer,
    StepRecord,
)
from profile_scenarios import BATCH_FUNCTION, profile_script


def test_replay_splits_host_gaps_by_what_follows_and_files_sampled_frames():
    # step: 30 ms gap -> forward 10 ms -> 20 ms gap -> backward 10 ms -> optimizer 5 ms -> 5 ms gap -> step
    log = [STEP, 0.0, FORWARD_IN, 0.030, FORWARD_OUT, 0.040, BACKWARD_IN, 0.060, BACKWARD_OUT, 0.070]
    log += [OPTIMIZER_IN, 0.070, OPTIMIZER_OUT, 0.075, STEP, 0.080]
    samples = [
        (0.010, ("train.py:12 get_batch", "train.py:12 get_batch")),
        (0.020, ("train.py:12 get_batch", "memmap.py:350 __getitem__")),
        (0.035, ("train.py:30 forward", "linear.py:125 forward")),  # inside forward: not a gap
        (0.050, ("train.py:40 loss_scale", "train.py:40 loss_scale")),
        (0.090, ("train.py:50 later", "train.py:50 later")),  # after the log's end: kept for later
    ]
    timer, records = PhaseTimer(), []
    used = timer.replay(log, 0.0, records, samples)
    assert used == 4
    (step,) = records
    assert abs(step.phase_s["host_input"] - 0.030) < 1e-9
    assert abs(step.phase_s["other"] - 0.025) < 1e-9  # the gap before backward and the one before the end
    assert abs(sum(step.phase_s.values()) - step.wall_s) < 1e-9  # still exclusive
    assert timer.frames == {
        ("host_input", "train.py:12 get_batch", "train.py:12 get_batch"): 1,
        ("host_input", "train.py:12 get_batch", "memmap.py:350 __getitem__"): 1,
        ("other", "train.py:40 loss_scale", "train.py:40 loss_scale"): 1,
    }


def test_a_device_wait_before_the_forward_is_not_input():
    """``loss.item()`` after the optimizer waits on the GPU: that is a sync, not batch preparation."""
    log = [STEP, 0.0, SYNC, 0.020, FORWARD_IN, 0.030, FORWARD_OUT, 0.040, STEP, 0.040]
    records: list[StepRecord] = []
    PhaseTimer().replay(log, 0.0, records)
    assert abs(records[0].phase_s["host_input"] - 0.010) < 1e-9
    assert abs(records[0].phase_s["other"] - 0.020) < 1e-9


def by_id(doc: dict) -> dict[str, dict]:
    return {f["id"]: f for f in doc["findings"]}


def test_a_custom_get_batch_before_the_forward_is_input_bound_with_a_prefetch_fix(tmp_path):
    doc = profile_script(tmp_path, BATCH_FUNCTION, str(tmp_path / "tokens.bin"), "before_forward")
    phases = doc["phases"]
    assert phases["host_input"]["pct"] > 50  # a 30 ms sleep against a step of a few ms
    assert phases["other"]["pct"] < T.OTHER_HOST_TIME_PCT
    top = doc["findings"][0]
    assert top["id"] == "input_bound" and top["severity"] == "high"
    assert top["metrics"]["input_source"] == "batch_function"
    assert "get_batch" in top["metrics"]["top_frames"][0] and "train.py" in top["metrics"]["top_frames"][0]
    assert "background thread" in top["fix"] and "def prefetch" in top["fix_snippet"]
    assert "get_batch(...)" in top["fix_snippet"] and "pin_memory" not in top["fix_snippet"]  # a CPU run
    share = top["metrics"]["input_wait_pct"]  # rounded to 0.1 in the metrics: allow that much
    # overlapping the batch with the rest of the step can at most make the step the longer of the two
    assert 1.0 < top["gain"]["low"] <= 100 / max(share - 0.05, 100 - share - 0.05)
    bound = 100 / (100 - share - 0.05)
    if "scheduler share" in top["gain"]["note"]:
        # a busy machine (other processes >= 25 % of the CPU): each worker also takes a scheduler share the
        # run did not have, and the high end says so (failed once with a profile running beside it)
        bound *= 1 + max(1, top["metrics"]["suggested_num_workers"] or 1)
    widened = re.search(r"quartiles \((\d+)-(\d+) % of the median step\)", top["gain"]["note"])
    if widened:
        # the range is also widened by the measured steps' upper quartile (another run's typical step moves
        # that much; printed to the percent): 2.875 against an unwidened 2.859 failed once in CI at load ~2
        bound *= (int(widened.group(2)) + 0.5) / 100
    assert top["gain"]["high"] <= bound


def test_get_batch_between_forward_and_backward_as_in_nanogpt_is_named_by_its_frames(tmp_path):
    """nanoGPT's train.py fetches the next batch right after the forward (to overlap it with the GPU):
    the time lands in ``other`` and the finding names get_batch by its sampled frames. The injected
    sleep is not in a data library and not before the forward, so nothing says it is batch preparation:
    no name is read ("batch" in ``get_batch`` does not make it input), the fix is the generic one."""
    doc = profile_script(tmp_path, BATCH_FUNCTION, str(tmp_path / "tokens.bin"), "after_forward")
    assert doc["phases"]["other"]["pct"] > 50
    top = doc["findings"][0]
    assert top["id"] == "unexplained_host_time" and top["category"] == "host"
    assert top["metrics"]["looks_like_input"] is False
    assert "train.py" in top["metrics"]["top_frames"][0] and "get_batch" in top["metrics"]["top_frames"][0]
    assert "get_batch" in top["summary"]
    # Amdahl: no more than removing all of it; both figures are rounded (the share to 0.01 pp, the gain
    # to 0.001), so the bound is taken at the share's upper rounding edge
    assert top["gain"]["high"] <= 100 / (100 - top["metrics"]["other_pct"] - 0.005) + 5e-4


def test_per_step_logging_before_the_next_forward_is_named_by_its_frame(tmp_path):
    """A per-step report_progress() after the optimizer step runs in the gap that ends in the next
    forward. No function name is read any more (issue 27), so by its position it counts as preparing
    the next batch; the finding still names the function, so the user sees where the time goes.
    (Telling logging from batch preparation there needs data flow: left open.)"""
    doc = profile_script(tmp_path, BATCH_FUNCTION, str(tmp_path / "tokens.bin"), "logging")
    top = doc["findings"][0]
    assert top["id"] in ("input_bound", "unexplained_host_time")
    assert "report_progress" in top["metrics"]["top_frames"][0]


def test_small_host_shares_stay_quiet():
    ev = Evidence.flat(
        source="profile",
        step_time_s=0.1,
        phase_s={"forward": 0.05, "backward": 0.035, "host_input": 0.006, "other": 0.009},
        host_frames=[{"phase": "other", "frame": "train.py:9 log", "leaf": "train.py:9 log", "pct": 100.0}],
    )
    ids = {f.id for f in diagnose(ev)}
    assert "input_bound" not in ids and "unexplained_host_time" not in ids


_PREFETCH_RUN = """
import atexit, threading, time
import torch

def make_batch():
    time.sleep(0.002)
    return torch.randn(64, 64) @ torch.randn(64, 64)

# atexit runs last-registered first: this check runs after the snippet's own exit handler
atexit.register(lambda: print("threads left", [t.name for t in threading.enumerate() if t.daemon]))
SNIPPET
batches = prefetch(make_batch)
total = sum(float(next(batches).sum()) for _ in range(5))
print("took 5 batches")
"""


def test_the_prescribed_prefetch_thread_runs_and_is_stopped_before_python_exits(tmp_path):
    # a daemon thread still in a torch op while the interpreter shuts down aborts the process (exit 134):
    # the snippet's thread must be stopped and joined at exit, with the batches it fed the loop taken
    from gpuwise.diagnose.rules.loader_advice import batch_function_fix

    _, snippet = batch_function_fix(Evidence(source="profile"), "", "get_batch")
    snippet = snippet.split("batches = prefetch(")[0]  # the function; the call and the copy are the user's
    script = tmp_path / "prefetch_run.py"
    script.write_text(_PREFETCH_RUN.replace("SNIPPET", snippet))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "took 5 batches" in proc.stdout and "threads left []" in proc.stdout, proc.stdout
