"""`gpuwise profile -- python script.py`: the script runs unchanged in a child process, with the real
entry point, real exit codes, real signals and a real SQLite store."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli, run_torchrun_profile
from gpuwise.diagnose import load_evidence

TRAIN = textwrap.dedent(
    """
    import json, os, signal, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)

    class Slow(Dataset):
        def __len__(self):
            return 100000
        def __getitem__(self, i):
            time.sleep(0.001)
            return torch.randn(16), i % 4

    mode = sys.argv[1]
    steps = int(sys.argv[2])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print("hello from the script")
    for step, (x, y) in enumerate(DataLoader(Slow(), batch_size=8)):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if step + 1 == steps:
            if mode == "raise":
                raise RuntimeError("the script failed")
            if mode == "sigint":
                os.kill(os.getpid(), signal.SIGINT); time.sleep(5)
            if mode == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)
            if mode == "exit":
                sys.exit(3)
            if mode not in ("forever", "sigkill"):
                break
        if mode == "sigkill" and step + 1 >= steps:
            # killed once a periodic flush has left a record with steps (gpuwise's timing, not this loop's)
            out_dir = json.loads(os.environ["GPUWISE_PROFILE"])["out_dir"]
            record = os.path.join(out_dir, f"run-{os.getpid()}.json")
            steps_file = os.path.join(out_dir, f"steps-{os.getpid()}.jsonl")  # periodic flushes append here
            flushed = len(open(steps_file).readlines()) if os.path.exists(record) else 0
            if flushed:
                print(f"killed after step {step + 1} with {flushed} flushed", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
    print("done")
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def profile(tmp_path: Path, script: Path, *args: str, opts: tuple[str, ...] = ()):
    return run_cli(
        "profile",
        "--json",
        "--steps",
        "6",
        "--warmup",
        "2",
        "--store",
        str(tmp_path / "runs.sqlite"),
        *opts,
        "--",
        sys.executable,
        str(script),
        *args,
    )


def test_profile_finds_the_slow_loader_and_keeps_stdout_clean(tmp_path, script):
    result = profile(tmp_path, script, "ok", "12")
    assert result.exit_code == 0, result.stderr
    doc = result.json()  # the script's own prints went to stderr, so stdout is one JSON document
    assert "hello from the script" in result.stderr
    assert doc["kind"] == "profile" and doc["status"] == "completed"
    assert doc["measured_steps"] == 6
    assert doc["findings"][0]["id"] == "input_bound"
    assert set(doc["phases"]) == {
        "data_wait",
        "h2d_copy",
        "forward",
        "backward",
        "optimizer",
        "host_input",
        "other",
    }
    assert doc["evidence"]["source"] == "profile" and doc["evidence"]["loader_num_workers"] == 0
    assert doc["runs"][0]["telemetry"]["cpu_count"] >= 1
    # the document is evidence `gpuwise plan --evidence` accepts
    (tmp_path / "run.json").write_text(result.stdout)
    assert load_evidence(tmp_path / "run.json")[0].loader.input_wait_pct > 5


def test_exit_code_passes_through(tmp_path, script):
    result = profile(tmp_path, script, "exit", "4")
    assert result.exit_code == 3
    assert result.json()["exit_code"] == 3


def test_exception_in_script_still_saves_the_partial_run(tmp_path, script):
    result = profile(tmp_path, script, "raise", "5", opts=("--steps", "50"))
    assert result.exit_code == 1
    assert "the script failed" in result.stderr  # the user's traceback is shown as usual
    run = result.json()["runs"][0]
    assert run["status"] == "error" and "RuntimeError" in run["error"]
    assert run["total_steps"] == 5
    shown = run_cli("runs", "show", str(run["run_id"]), "--json", "--store", str(tmp_path / "runs.sqlite"))
    assert shown.json()["status"] == "error"


@pytest.mark.parametrize("mode, code", [("sigint", 130), ("sigterm", 143)])
def test_interrupted_script_still_saves_the_partial_run(tmp_path, script, mode, code):
    result = profile(tmp_path, script, mode, "5", opts=("--steps", "50"))
    assert result.exit_code == code
    run = result.json()["runs"][0]
    assert run["status"] == "interrupted"
    assert run["total_steps"] == 5


def test_a_hard_kill_leaves_the_steps_flushed_before_it(tmp_path, script):
    """SIGKILL cannot be caught: what is left is the record flushed every second (steps replayed at most
    2 s before). The script kills itself once that record holds steps, so it passes at any load."""
    result = profile(tmp_path, script, "sigkill", "40", opts=("--steps", "100000"))
    assert result.exit_code == 137, result.stderr[-2000:]
    killed_after, flushed = (int(w) for w in result.stderr.split("killed after step ")[1].split()[:3:2])
    run = result.json()["runs"][0]
    assert run["status"] == "incomplete"
    assert 1 <= flushed <= run["total_steps"] <= killed_after


def test_stop_ends_the_script_after_the_measured_steps(tmp_path, script):
    result = profile(tmp_path, script, "forever", "0", opts=("--stop",))
    assert result.exit_code == 0
    assert "done" not in result.stderr  # the script did not reach its end
    assert result.json()["measured_steps"] == 6


def test_a_script_without_torch_work_profiles_nothing(tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text("print('no training here')\n")
    result = run_cli("profile", "--store", str(tmp_path / "runs.sqlite"), "--", sys.executable, str(empty))
    assert result.exit_code == 0
    assert "nothing was profiled" in result.stdout


def test_bad_commands_get_one_line_and_exit_2(tmp_path):
    missing = run_cli("profile", "--", str(tmp_path / "nope.py"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    nothing = run_cli("profile")
    assert nothing.exit_code == 2 and "after --" in nothing.stderr


TORCHRUN = textwrap.dedent(
    """
    import os, sys, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(512, 16), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        if rank == 1:
            time.sleep(0.02)  # a slow rank
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if step == 11:
            break
    dist.barrier()  # no rank leaves while the other is still in a collective
    # then leave without gloo's teardown, which is not under test here: at interpreter exit it aborts a rank
    # now and then (PyTorch's race, pytorch/pytorch#190489: 3 of 59 bare torchrun runs of a script like
    # this one under load; docs/profiling.md, "A rank that aborts at exit")
    sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
    """
)


@pytest.mark.slow
def test_torchrun_records_one_run_per_rank(tmp_path):
    path = tmp_path / "ddp.py"
    path.write_text(TORCHRUN)
    result = run_torchrun_profile(path, tmp_path / "runs.sqlite", steps=8)
    assert result.exit_code == 0, result.stderr[-2000:]
    doc = result.json()
    assert sorted(r["rank"] for r in doc["runs"]) == [0, 1], (doc["notes"], result.stderr[-3000:])
    assert all(r["measured_steps"] == 8 and r["world_size"] == 2 for r in doc["runs"]), [
        (r["rank"], r["status"], r["measured_steps"]) for r in doc["runs"]
    ]
    assert len({r["group_id"] for r in doc["runs"]}) == 1
    # per-rank evidence plus the cross-rank one (rank -> step time)
    assert [e["rank"] for e in doc["evidence"]] == [0, 1, None]
    assert set(doc["evidence"][2]["rank_step_time_s"]) == {"0", "1"}
    listed = run_cli("runs", "list", "--json", "--store", str(tmp_path / "runs.sqlite")).json()
    assert sorted(r["rank"] for r in listed["runs"]) == [0, 1]
