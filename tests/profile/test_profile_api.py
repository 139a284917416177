"""The live profiler on real CPU training loops with known bottlenecks (Python API, in-process)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler, TensorDataset

import gpuwise
from gpuwise.profile.loader_watch import LoaderWatch, batch_tensors
from gpuwise.profile.phases import PHASES, PhaseTimer
from gpuwise.profile.recorder import Recorder


class SlowItems(Dataset):
    def __init__(self, n: int, delay_s: float) -> None:
        self.n, self.delay_s = n, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay_s)
        return torch.full((32,), float(i % 7)), i % 4


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread: on a small shared machine two threads make tiny ops swing with other load."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def small_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def train(loader, model, steps: int, keep=None) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if keep is not None:
            keep(model, x, loss)
        if i + 1 >= steps:
            break
    return losses


def ids(p) -> list[str]:
    return [f.id for f in p.result.findings]


def test_slow_getitem_is_input_bound(tmp_path):
    loader = DataLoader(SlowItems(400, 0.004), batch_size=8)
    with gpuwise.profile(steps=12, warmup=2, store=tmp_path / "runs.sqlite") as p:
        train(loader, small_model(), 16)
    run = p.result
    assert run.run_id == 1
    assert "input_bound" in ids(p)
    assert max(run.phases, key=lambda k: run.phases[k].pct) == "data_wait"
    assert run.evidence.loader.loader_num_workers == 0 and run.evidence.loader.loader_pin_memory is False
    # the sampled batch as a worker would hand it over: x (8 x 32 float32) and y (8 int64)
    assert run.evidence.loader.loader_batch_tensors == 2
    assert run.evidence.loader.loader_batch_bytes == 8 * 32 * 4 + 8 * 8
    assert run.summary.measured_steps == 12 and run.summary.warmup_steps == 2
    # a step's phases add up to its wall time, so the shares add up to 100 %
    assert sum(v.pct for v in run.phases.values()) == pytest.approx(100.0, abs=0.01)


def test_a_batch_counts_its_tensors_and_bytes_whatever_it_nests_in():
    """What a worker hands over per batch: one storage per tensor, in tuples, lists and dicts (Hugging
    Face batches are dicts); strings and numbers are not tensors."""
    ids = torch.zeros(4, 16, dtype=torch.int64)
    assert batch_tensors((torch.zeros(2, 3), torch.zeros(2, dtype=torch.int64))) == (2, 24 + 16)
    assert batch_tensors({"input_ids": ids, "labels": ids, "text": ["a", "b"]}) == (2, 2 * 512)
    assert batch_tensors([{"x": torch.zeros(5)}, (torch.zeros(1), 3)]) == (2, 24)
    assert batch_tensors(["a", 1, None]) == (0, 0)


def test_in_memory_data_with_heavy_compute_is_not_input_bound():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(128 * 24, 1024), torch.randint(0, 4, (128 * 24,)))
    model = torch.nn.Sequential(
        *[torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU()) for _ in range(4)],
        torch.nn.Linear(1024, 4),
    )
    # batches gathered with one index each (~0.1 ms against ~100 ms of compute): even a preemption that
    # lands on a fetch at load 5 leaves the data wait far below the input_bound threshold
    batches = BatchSampler(SequentialSampler(data), batch_size=128, drop_last=False)
    with gpuwise.profile(steps=20, warmup=2, store=False) as p:
        train(DataLoader(data, sampler=batches, batch_size=None), model, 22)
    assert "input_bound" not in ids(p)
    assert p.phases["forward"].pct + p.phases["backward"].pct > p.phases["data_wait"].pct


LEAKING_SCRIPT = """
import json, torch, gpuwise
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
data = TensorDataset(torch.randn(256 * 30, 1024), torch.randint(0, 4, (256 * 30,)))
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
kept = []  # the leak: a metric computed with grad enabled keeps its whole graph (and activations) alive
with gpuwise.profile(steps=20, warmup=2, store=False) as p:
    for i, (x, y) in enumerate(DataLoader(data, batch_size=256)):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        kept.append(model(x).softmax(-1).max())
        if i + 1 >= 24:
            break
print(json.dumps([f.to_dict() for f in p.result.findings]))
"""


def test_graph_holding_list_is_memory_growth(tmp_path):
    """In a fresh process, as a training script runs: what earlier tests left in this process's heap
    (hundreds of MiB freed by simulations and traces) would make the probe fall back to RSS, and a heap
    with that much free memory absorbs a 20 MiB leak without growing."""
    script = tmp_path / "leak.py"
    script.write_text(LEAKING_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    findings = {f["id"]: f for f in json.loads(proc.stdout.strip().splitlines()[-1])}
    assert "memory_growth" in findings, list(findings)
    # ≥ the 1 MiB activation each kept graph holds
    assert findings["memory_growth"]["metrics"]["bytes_per_step"] > 1_000_000


def run_script(tmp_path, text: str) -> dict:
    script = tmp_path / "train.py"
    script.write_text(text)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {f["id"]: f for f in json.loads(proc.stdout.strip().splitlines()[-1])}


def test_detached_losses_do_not_grow(tmp_path):
    """The same loop keeping only detached scalars: no leak. In a fresh process too, as a script runs:
    in pytest's own process the heap left by earlier tests once made RSS the measure, and first-touch
    pages read as growth."""
    detached = LEAKING_SCRIPT.replace(
        "kept.append(model(x).softmax(-1).max())",
        "with torch.no_grad():\n            kept.append(model(x).softmax(-1).max())\n"
        "        kept.append(loss.detach())",
    )
    assert "torch.no_grad()" in detached
    findings = run_script(tmp_path, detached)
    assert "memory_growth" not in findings, findings.get("memory_growth", {}).get("summary")


def test_periodic_slow_step_is_an_outlier_with_its_period():
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    with gpuwise.profile(steps=40, warmup=2, store=False) as p:
        for step in range(42):
            # ordinary steps vary between 10 and 70 ms: a stall from other load does not look like an outlier
            time.sleep(0.010 + 0.006 * (step % 11))
            if step % 8 == 1:
                time.sleep(0.4)  # a "checkpoint" every 8th step (measured steps 7, 15, 23, 31, 39)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    outliers = next(f for f in p.result.findings if f.id == "step_outliers")
    assert outliers.metrics["period_steps"] == 8
    assert len(outliers.metrics["outlier_steps"]) == 5


def _seeded_run(profiled: bool):
    torch.manual_seed(1234)
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.Dropout(0.3), torch.nn.ReLU(), torch.nn.Linear(64, 4)
    )
    if profiled:
        with gpuwise.profile(steps=10, warmup=2, store=False):
            losses = train(loader, model, 25)
    else:
        losses = train(loader, model, 25)
    return losses, [t.detach().clone() for t in model.state_dict().values()]


def test_profiled_run_is_bitwise_identical():
    plain_losses, plain_weights = _seeded_run(False)
    prof_losses, prof_weights = _seeded_run(True)
    assert plain_losses == prof_losses  # exact float equality, shuffling and dropout included
    assert all(torch.equal(a, b) for a, b in zip(plain_weights, prof_weights, strict=False))


def test_hooks_are_removed_after_the_run():
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_mod
    from torch.utils.data import dataloader as dl_mod

    before = (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_forward_hooks),
        len(optim_mod._global_optimizer_pre_hooks),
        len(optim_mod._global_optimizer_post_hooks),
    )
    next_before, backward_before = dl_mod._BaseDataLoaderIter.__next__, torch.autograd.backward
    model = small_model()
    with gpuwise.profile(steps=3, warmup=1, store=False):
        assert torch.autograd.backward is not backward_before
        train(DataLoader(SlowItems(64, 0.0), batch_size=8), model, 6)
    after = (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_forward_hooks),
        len(optim_mod._global_optimizer_pre_hooks),
        len(optim_mod._global_optimizer_post_hooks),
    )
    assert after == before
    assert dl_mod._BaseDataLoaderIter.__next__ is next_before and torch.autograd.backward is backward_before
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_errors_inside_hooks_are_contained_and_reported_once(monkeypatch, capsys):
    def broken(self, it):
        raise RuntimeError("boom")

    monkeypatch.setattr(LoaderWatch, "wait_begins", broken)
    with gpuwise.profile(steps=8, warmup=1, store=False) as p:
        losses = train(DataLoader(SlowItems(128, 0.0), batch_size=8), small_model(), 10)
    assert len(losses) == 10  # the user's loop ran to the end
    errors = p.result.summary.hook_errors
    assert errors[0].where == "DataLoader hook" and errors[0].count >= 9
    assert capsys.readouterr().err.count("boom") == 1


def test_exception_in_the_block_passes_through_and_keeps_the_partial_run(tmp_path):
    store = tmp_path / "runs.sqlite"
    p = gpuwise.profile(steps=50, warmup=1, store=store)
    with pytest.raises(ValueError, match="user bug"), p:
        model = small_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(12):
            model(torch.randn(4, 32)).sum().backward()
            opt.step()
        raise ValueError("user bug")
    assert p.result.summary.status == "error"
    assert p.result.summary.measured_steps == 11
    from gpuwise.profile.saved_runs import load_run
    from gpuwise.store.runs import RunStore

    with RunStore.open(store) as runs:
        assert load_run(runs, "last").summary.error == "ValueError: user bug"


def test_manual_steps_take_over_from_optimizer_steps():
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuwise.profile(warmup=0, store=False) as p:
        for _ in range(6):  # two optimizer steps per manual step
            for _ in range(2):
                model(torch.randn(4, 32)).sum().backward()
                opt.step()
            p.step()
    assert p.result.summary.total_steps == 6


def test_only_one_profile_at_a_time():
    with gpuwise.profile(store=False), pytest.raises(RuntimeError, match="already active"):
        gpuwise.profile(store=False).start()


def test_host_to_device_copies_are_counted_with_pinning():
    """A copy to another device (here 'meta', as no GPU exists) counts as a host->device copy."""
    rec = Recorder(warmup=0, telemetry=False, copies_and_syncs=True).start()
    try:
        x = torch.randn(256)
        model = small_model()
        model(torch.randn(2, 32))
        x.to("meta")
        torch.ones(10).to("meta", non_blocking=True)
        x.to(torch.float64)  # same device: not a copy between devices
        rec.step()
    finally:
        raw = rec.stop()
    step = raw["steps"][0]
    assert step["h2d_bytes"] == 256 * 4 + 10 * 4
    assert step["h2d_pageable_bytes"] == step["h2d_bytes"]  # nothing was pinned
    assert torch.Tensor.to is not None and "to" not in torch.Tensor.__dict__  # restored to the C method


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["push", "pop", "boundary"]), st.sampled_from(PHASES[:-1]), st.floats(0, 5)
        ),
        max_size=60,
    )
)
def test_phase_shares_always_add_up_to_the_step(events):
    clock = [0.0]
    timer = PhaseTimer(clock=lambda: clock[0])
    timer.push("forward")  # start the first step
    for action, phase, dt in events:
        clock[0] += dt
        if action == "push":
            timer.push(phase)
        elif action == "pop" and timer.stack:
            timer.pop(timer.stack[-1])
        elif action == "boundary":
            _start, wall, phases = timer.boundary()
            assert sum(phases.values()) == pytest.approx(wall, abs=1e-9)
            assert all(v >= -1e-9 for v in phases.values())


def test_host_blocking_calls_are_counted(monkeypatch):
    """torch.cuda.synchronize is wrapped like .item()/.cpu() on CUDA tensors (a stand-in here: no GPU)."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: time.sleep(0.002))
    rec = Recorder(warmup=0, telemetry=False, copies_and_syncs=True).start()
    try:
        small_model()(torch.randn(2, 32))
        torch.cuda.synchronize()
        torch.cuda.synchronize()
        torch.ones(1).item()  # a CPU tensor never blocks on a device: not counted
        rec.step()
    finally:
        raw = rec.stop()
    step = raw["steps"][0]
    assert step["sync_calls"] == 2 and step["sync_wait_s"] >= 0.004


def test_a_forked_child_keeps_the_hooks_but_records_nothing():
    """A DataLoader worker is a fork of the training thread: its copy of the recorder must stay inert."""
    import os

    from gpuwise.profile.recorder import active_recorder

    model = small_model()
    with gpuwise.profile(warmup=0, store=False) as p:
        model(torch.randn(2, 32))
        pid = os.fork()
        if pid == 0:  # the child: hooks still installed, nothing may be logged
            code = 1
            try:
                logged = len(p.recorder.events.entries)
                for _ in range(50):
                    model(torch.randn(2, 32)).sum().backward()
                code = 0 if len(p.recorder.events.entries) == logged and active_recorder() is None else 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        model(torch.randn(2, 32))
    assert os.waitstatus_to_exitcode(status) == 0
    assert p.recorder.steps_closed == 0 and active_recorder() is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["enter", "exit", "step", "sync", "drain"]), st.integers(0, 4)), max_size=80
    )
)
def test_steps_counted_at_boundaries_match_the_replayed_records(actions):
    """The hooks count steps as they happen; the replay of the log must find exactly those steps."""
    from gpuwise.profile.phases import EXIT, SYNC

    rec = Recorder(warmup=0, telemetry=False)
    stack = []
    for action, phase in actions:
        if action == "enter":
            rec.mark(phase)
            stack.append(phase)
        elif action == "exit" and stack:
            rec.mark(stack.pop() + EXIT)
        elif action == "step":
            rec.end_step()
        elif action == "sync":
            rec.log(SYNC, 0.001)
        else:
            rec.events.drain()
    rec.events.drain()
    assert len(rec.records) == rec.steps_closed
    for record in rec.records:
        assert sum(record.phase_s.values()) == pytest.approx(record.wall_s, abs=1e-9)


def test_slow_steps_are_replayed_within_seconds_for_the_periodic_flush():
    """A flush from the telemetry thread takes the steps replayed so far: with slow steps the log must
    not wait for its size limit."""
    from time import perf_counter

    from gpuwise.profile.event_log import DRAIN_EVERY_S
    from gpuwise.profile.phases import FORWARD_IN, FORWARD_OUT

    rec = Recorder(warmup=0, telemetry=False)
    rec.events.drained_at = perf_counter()
    for _ in range(3):
        rec.mark(FORWARD_IN)
        rec.mark(FORWARD_OUT)
        rec.end_step()
    assert rec.steps_closed == 3 and rec.records == []  # fast steps: still in the log
    rec.events.drained_at -= DRAIN_EVERY_S  # as if the last replay was that long ago
    rec.mark(FORWARD_IN)
    rec.mark(FORWARD_OUT)
    rec.end_step()
    assert len(rec.records) == rec.steps_closed == 4
