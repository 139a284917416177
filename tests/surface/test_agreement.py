"""One workload, one memory figure: `memory`, `plan` and `fit` agree, and a plan's recommendation holds.

Why: a user who runs `gpuwise memory`, then `gpuwise plan`, then `gpuwise fit` on the same workload must
read the same per-GPU peak (device total, what nvidia-smi would show) in all three, within 0.5 %; and the
configuration a plan recommends, fed back to `memory` as a workload (`plan --json` gives it), must need
the memory the plan printed for it. Checked on every training example and on generated workloads
(hypothesis, bounded sizes, derandomized). The CLI runs in-process (`gpuwise.cli.app.main`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.catalog.gpus import clear_cache
from gpuwise.cli.app import main
from gpuwise.workload import load_workload
from gpuwise.workload.spec import TRAINING_TASKS

REPO = Path(__file__).resolve().parents[2]
TRAINING = [p for p in sorted((REPO / "examples").glob("*.yaml")) if load_workload(p).task in TRAINING_TASKS]
TOLERANCE_PCT = 0.5
GIB = 2**30


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """stdout of `gpuwise ARGV` run in-process; fails the test on any exit status but 0."""
    clear_cache()
    try:
        main(argv)
    except SystemExit as done:
        assert done.code in (0, None), (
            f"gpuwise {' '.join(argv)}: exit {done.code}\n{capsys.readouterr().err}"
        )
    finally:
        clear_cache()
    return capsys.readouterr().out


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return json.loads(run([*argv, "--json"], capsys))


def assert_close(name: str, got: float, want: float) -> None:
    assert abs(got - want) <= want * TOLERANCE_PCT / 100, (
        f"{name}: {got / GIB:.3f} GiB vs {want / GIB:.3f} GiB"
    )


def layout_flags(row: dict[str, Any]) -> list[str]:
    """`memory` flags for the GPU, count and layout of one `fit --json` row."""
    return [
        *("-g", row["gpu"], "-n", str(row["num_gpus"]), "--sharding", row["sharding"]),
        *("--tp", str(row["tp"]), "--pp", str(row["pp"])),
    ]


def check_agreement(source: list[str], capsys: pytest.CaptureFixture[str], fit_rows: int = 3) -> None:
    """memory's device total = plan's current peak = fit's row for the same GPU and count (SOURCE is a
    workload file or flags); and a few other fit rows = memory run at that GPU, count and layout."""
    memory = run_json(["memory", *source], capsys)
    plan = run_json(["plan", *source], capsys)["plan"]
    fit = run_json(["fit", *source], capsys)
    total = memory["device_total_bytes"]
    assert_close("plan current peak vs memory", plan["current"]["peak_bytes"], total)
    assert_close("plan memory section vs memory", plan["memory"]["current"]["device_total_bytes"], total)
    gpu, count = plan["current"]["gpu"], plan["current"]["num_gpus"]
    same = [r for r in fit["rows"] if (r["gpu"], r["num_gpus"]) == (gpu, count)]
    if memory["fits"] and count in fit["counts"]:  # fit lists every GPU × count on which it fits
        assert same, f"memory says it fits on {count} × {gpu}, fit has no row for it"
    for row in same:
        assert_close(f"fit row {count} × {gpu} vs memory", row["device_total_bytes"], total)
    others = [r for r in fit["rows"] if r not in same][:: max(1, len(fit["rows"]) // fit_rows)][:fit_rows]
    for row in others:
        there = run_json(["memory", *source, *layout_flags(row)], capsys)
        label = f"fit row {row['num_gpus']} × {row['gpu']} ({row['sharding']}) vs memory there"
        assert_close(label, row["device_total_bytes"], there["device_total_bytes"])


@pytest.mark.parametrize("example", TRAINING, ids=lambda p: p.stem)
def test_memory_plan_and_fit_agree(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check_agreement([str(example)], capsys)


@pytest.mark.parametrize("example", TRAINING, ids=lambda p: p.stem)
def test_recommended_config_fed_back_to_memory_needs_what_the_plan_printed(
    example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = run_json(["plan", str(example)], capsys)["plan"]
    recommended = tmp_path / "recommended.yaml"
    recommended.write_text(yaml.safe_dump(plan["config"]["workload"]))
    memory = run_json(["memory", str(recommended)], capsys)
    printed = plan["config"]["outcome"]["peak_bytes"]
    assert_close("memory of the recommended config vs the plan's", memory["device_total_bytes"], printed)
    if plan["memory"]["recommended"]:
        assert_close(
            "plan memory section (recommended) vs memory",
            plan["memory"]["recommended"]["device_total_bytes"],
            memory["device_total_bytes"],
        )
    terminal = run(["plan", str(example)], capsys)
    memory_row = next(line for line in terminal.splitlines() if "memory per GPU" in line)
    assert f"{printed / GIB:.1f} GiB" in memory_row, memory_row
    assert f"{memory['device_total_bytes'] / GIB:.2f}" in run(["memory", str(recommended)], capsys)


@pytest.mark.parametrize("example", TRAINING, ids=lambda p: p.stem)
def test_recommended_config_fed_back_to_cost_costs_what_the_plan_printed(
    example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan's $/hour, speed and $ per run of its recommendation are what `cost` says of it.

    The plan's speed is the GPUs' while busy (what the recommendation buys once the pipeline keeps
    them fed); `cost`'s is the average over the held time at the workload's observed busy share
    (`utilization_pct`): the two are one number times that share, which this checks too."""
    plan = run_json(["plan", str(example)], capsys)["plan"]
    workload = plan["config"]["workload"]
    recommended = tmp_path / "recommended.yaml"
    recommended.write_text(yaml.safe_dump(workload))
    outcome = plan["config"]["outcome"]
    cost = run_json(["cost", str(recommended)], capsys)["cost"]
    training = cost["training"]
    busy = (workload.get("utilization_pct") or 100.0) / 100.0
    assert cost["usd_per_hour"] == pytest.approx(outcome["usd_per_hour"], rel=0.005)
    assert training["tokens_per_s"] == pytest.approx(outcome["throughput_per_s"] * busy, rel=0.005)
    if outcome["usd_per_run"] is not None:
        assert training["run_cost_usd"] == pytest.approx(outcome["usd_per_run"], rel=0.005)


# Generated training workloads: small catalog models, bounded sizes, every layout the flags allow.
workloads = st.fixed_dictionaries(
    {
        "-m": st.sampled_from(["llama-3.2-1b", "qwen2.5-0.5b", "llama-3-8b", "mistral-7b-v0.1"]),
        "-t": st.sampled_from(sorted(TRAINING_TASKS - {"cv-train"})),
        "-g": st.sampled_from(["a100-80gb-sxm", "h100-sxm", "l4", "rtx-4090", "mi300x"]),
        "-n": st.sampled_from([1, 2, 4]),
        "-b": st.integers(1, 8),
        "-s": st.sampled_from([256, 1024, 2048, 4096]),
        "--checkpointing": st.sampled_from(["none", "selective", "full"]),
        "--sharding": st.sampled_from(["none", "ddp", "zero2", "fsdp"]),
    }
)


def flags(drawn: dict[str, Any]) -> list[str]:
    """CLI flags for a drawn workload; QLoRA needs nf4 weights, a single GPU needs no sharding."""
    argv = [str(drawn.pop("-m"))]
    if drawn["-n"] == 1:
        drawn["--sharding"] = "none"
    if drawn["-t"] == "qlora":
        drawn["-p"] = "nf4"
    for flag, value in drawn.items():
        argv += [flag, str(value)]
    return argv


@settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(workloads)
def test_generated_workloads_agree(capsys: pytest.CaptureFixture[str], drawn: dict[str, Any]) -> None:
    check_agreement(flags(dict(drawn)), capsys, fit_rows=1)
