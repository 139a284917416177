"""A straggler in live DDP: collectives make every rank's step equally long, so the rank the others
wait for is found from how long each rank waits in them (gpuwise/profile/collectives.py).

Real torchrun runs (gloo, 2 CPU ranks) of a script where one rank sleeps in its batch function;
the profiler must name that rank, and never change what the script computes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, run_torchrun_profile
from gpuwise.diagnose import Evidence, diagnose
from gpuwise.profile.analysis import ProfileRun, build_run
from gpuwise.profile.collectives import CollectiveWatch
from gpuwise.profile.rank_spread import cross_rank_evidence

SLOW_SLEEP_S = 0.03  # the straggler's extra time per step, in its batch function

DDP_STRAGGLER = textwrap.dedent(
    """
    import json, os, sys, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    SLOW_RANK, SLEEP_S, OUT = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)

    def get_batch():  # nanoGPT-style: no DataLoader
        if rank == SLOW_RANK:
            time.sleep(SLEEP_S)
        return torch.randn(16, 32, generator=gen), torch.randint(0, 4, (16,), generator=gen)

    losses = []
    for step in range(16):
        x, y = get_batch()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # an explicit collective, as logging code does
        losses.append([loss.item(), mean.item()])
    weights = [p.detach().sum().item() for p in model.parameters()]
    with open(f"{OUT}-{rank}.json", "w") as fh:
        json.dump({"losses": losses, "weights": weights}, fh)
    dist.barrier()  # no rank leaves while the other is still in a collective
    # then leave without gloo's teardown, which is not under test here: at interpreter exit it aborts a rank
    # now and then (PyTorch's race, pytorch/pytorch#190489: 3 of 59 bare torchrun runs of a script like
    # this one under load; docs/profiling.md, "A rank that aborts at exit")
    sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
    """
)


def _profile(tmp_path: Path, slow_rank: int) -> tuple[dict, Path]:
    """`gpuwise profile --json -- torchrun ...` of the script; the ranks write their results to OUT-r.json."""
    script = tmp_path / "ddp_straggler.py"
    script.write_text(DDP_STRAGGLER)
    out = tmp_path / f"profiled-slow{slow_rank}"
    result = run_torchrun_profile(
        script, tmp_path / "runs.sqlite", steps=10, args=[str(slow_rank), str(SLOW_SLEEP_S), str(out)]
    )
    assert result.exit_code == 0, result.stderr[-3000:]
    return result.json(), out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[int, tuple[dict, Path]]:
    """slow rank -> the profiled run (each torchrun launch costs seconds: run each once)."""
    return {rank: _profile(tmp_path_factory.mktemp(f"slow{rank}"), rank) for rank in (1, 0)}


def _straggler(doc: dict) -> dict:
    found = [f for f in doc["findings"] if f["id"] == "straggler"]
    assert len(found) == 1, ([f["id"] for f in doc["findings"]], doc["evidence"])
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize("slow_rank", [1, 0])
def test_the_rank_that_sleeps_is_named_the_straggler(runs, slow_rank):
    doc, _ = runs[slow_rank]
    per_rank = {e["rank"]: e for e in doc["evidence"] if e["rank"] is not None}
    waits = {rank: e["rank_comm_time_s"][str(rank)] for rank, e in per_rank.items()}
    fast_rank = 1 - slow_rank
    # the fast rank waits out most of the sleep at each step; the slow one hardly waits at all
    assert waits[fast_rank] - waits[slow_rank] > SLOW_SLEEP_S / 2, waits
    finding = _straggler(doc)
    assert finding["metrics"]["straggler_rank"] == slow_rank, finding
    assert f"Rank {slow_rank}" in finding["title"]


def _run_plain(script: Path, out: Path) -> None:
    """Both ranks started directly, as torchrun would (its agent costs seconds to start): no gpuwise."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ranks = []
    for rank in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
        env.update(RANK=str(rank), LOCAL_RANK=str(rank))
        argv = [sys.executable, str(script), "1", "0", str(out)]
        ranks.append(subprocess.Popen(argv, env=env, cwd=REPO, stderr=subprocess.PIPE, text=True))
    for proc in ranks:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]


@pytest.mark.slow
def test_profiling_ddp_leaves_losses_and_weights_bitwise_identical(runs, tmp_path):
    _, profiled = runs[1]
    plain = tmp_path / "plain"
    _run_plain(profiled.parent / "ddp_straggler.py", plain)
    for rank in (0, 1):
        with_gpuwise = json.loads(Path(f"{profiled}-{rank}.json").read_text())
        without = json.loads(Path(f"{plain}-{rank}.json").read_text())
        assert with_gpuwise == without, rank  # JSON floats round-trip exactly: bitwise equality


def _two_ranks(waits_0: list[float], waits_1: list[float]) -> Evidence:
    """Cross-rank evidence of a synchronous run with 10 ms steps and these per-step collective waits."""
    return Evidence.flat(
        source="profile",
        rank_step_time_s={0: 0.010, 1: 0.010},
        rank_comm_time_s={0: sum(waits_0) / len(waits_0), 1: sum(waits_1) / len(waits_1)},
        rank_comm_steps_s={0: waits_0, 1: waits_1},
    )


def test_a_rank_late_in_every_step_is_a_straggler():
    ev = _two_ranks([0.006 + 0.0001 * (i % 3) for i in range(12)], [0.001] * 12)
    finding = next(f for f in diagnose(ev) if f.id == "straggler")
    assert finding.metrics["straggler_rank"] == 1 and finding.metrics["late_steps_pct"] == 100.0


def test_ranks_that_take_turns_waiting_have_no_straggler():
    # a loaded machine preempts one rank, then the other: rank 1 waits less on average (one long
    # preemption of rank 0 made rank 1 wait 30 ms) but is late in only half of the steps
    waits_0 = [0.004, 0.0005] * 6
    waits_1 = [0.0005, 0.004] * 6
    waits_0[3] = 0.030
    assert "straggler" not in {f.id for f in diagnose(_two_ranks(waits_0, waits_1))}


def test_each_wait_belongs_to_the_step_in_which_it_ended():
    watch = CollectiveWatch(recorder=None)  # type: ignore[arg-type]  # annotate reads no recorder
    watch.ddp_waits = [(100.5, 0.2), (101.5, 0.3)]
    watch.calls = [(100.9, 0.05), (99.0, 1.0)]  # the second ended before the first step: dropped
    steps = [
        {"start_s": 0.0, "wall_s": 1.0},
        {"start_s": 1.0, "wall_s": 1.0},
        {"start_s": 2.0, "wall_s": 1.0},
    ]
    watch.annotate(steps, origin=100.0)
    assert [s["comm_wait_s"] for s in steps] == pytest.approx([0.25, 0.3, 0.0])


def _rank_run(rank: int, waits: list[float] | None) -> ProfileRun:
    steps = [{"start_s": 0.01 * i, "wall_s": 0.01, "phase_s": {}} for i in range(10)]
    if waits is not None:
        for step, wait in zip(steps, waits, strict=True):
            step["comm_wait_s"] = wait
    raw = {"meta": {"rank": rank, "world_size": 2}, "status": "completed", "steps": steps, "warmup": 0}
    return build_run(raw)


def test_cross_rank_evidence_compares_waits_only_when_every_rank_has_them():
    both = cross_rank_evidence([_rank_run(0, [0.006] * 10), _rank_run(1, [0.001] * 10)])
    assert both is not None and both.comm.rank_comm_time_s == pytest.approx({0: 0.006, 1: 0.001})
    assert both.comm.rank_comm_steps_s[1] == [0.001] * 10
    assert next(f for f in diagnose(both) if f.id == "straggler").metrics["straggler_rank"] == 1
    # rank 1 timed nothing: it could be the one the others wait for, so no rank is compared
    one = cross_rank_evidence([_rank_run(0, [0.006] * 10), _rank_run(1, None)])
    assert (
        one is not None
        and one.comm.rank_comm_time_s == {}
        and one.comm.rank_step_time_s == pytest.approx({0: 0.01, 1: 0.01})
    )
    assert "straggler" not in {f.id for f in diagnose(one)}


@pytest.mark.parametrize("others_pct, confidence", [(5.0, "medium"), (70.0, "low")])
def test_a_straggler_on_a_busy_machine_is_named_with_low_confidence(others_pct, confidence):
    runs = [_rank_run(0, [0.006] * 10), _rank_run(1, [0.001] * 10)]
    for run in runs:  # each rank's record counts its sibling (25 %) as "other processes"
        run.evidence.context.cpu_util_pct, run.evidence.context.other_cpu_pct = 25.0, 25.0 + others_pct
    ev = cross_rank_evidence(runs)
    assert ev is not None and ev.context.other_cpu_pct == pytest.approx(others_pct)
    finding = next(f for f in diagnose(ev) if f.id == "straggler")
    assert finding.metrics["straggler_rank"] == 1 and finding.confidence == confidence
    assert ("quiet machine" in finding.summary) == (confidence == "low")


def test_cpu_ranks_on_one_busy_machine_stretch_the_stragglers_low_end():
    """The merged evidence keeps the machine's core count the ranks share: without it the straggler's
    shared-cores stretch read every CPU run as quiet (ddp_tutorial_like under 2 burners: 9.4x measured
    against a 13.3x low end), and so does the device they share (an unknown device reads as a GPU, where
    compute does not share the cores). Ranks that disagree on the count (several hosts) keep none."""
    runs = [_rank_run(0, [0.006] * 10), _rank_run(1, [0.001] * 10)]
    for run in runs:  # each rank's record counts its sibling (25 %) as "other processes"
        run.evidence.context.cpu_util_pct, run.evidence.context.other_cpu_pct = 25.0, 25.0 + 95.0
        run.evidence.context.cpu_count, run.evidence.device = 2, "cpu"
    busy = cross_rank_evidence(runs)
    assert busy is not None and busy.context.cpu_count == 2 and busy.device == "cpu"
    low_busy = next(f for f in diagnose(busy) if f.id == "straggler").gain.low
    busy.context.cpu_count = None
    low_unknown = next(f for f in diagnose(busy) if f.id == "straggler").gain.low
    assert low_busy == pytest.approx(low_unknown / (2 / 3 / (2 / 4)), rel=0.01)  # 2 cores, 2 busy, 2 ranks
    runs[1].evidence.context.cpu_count = 8
    assert cross_rank_evidence(runs).context.cpu_count is None
