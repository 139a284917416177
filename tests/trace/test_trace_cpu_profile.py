"""`gpuwise trace` on a trace this test records itself: torch.profiler on a tiny CPU training loop.

No third-party file is needed (tests/README.md): the trace is made here, so a fresh clone without the
third-party data still runs the trace analyzer end to end on a real Kineto export. The ground truth is
the trace's own ProfilerStep events, read back from the exported JSON.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

# torch's note that each profiling cycle starts afresh (we record one cycle): not a problem of the test
pytestmark = pytest.mark.filterwarnings("ignore:.*Profiler clears events:UserWarning")
ACTIVE_STEPS = 4  # ProfilerStep#1..#4 recorded; step #0 is the profiler's warm-up


def record_cpu_trace(path: Path) -> float:
    """Profile ``1 + ACTIVE_STEPS`` steps of a 2-layer MLP (batch 32, 64 features) on the CPU and export
    the active ones as a Chrome trace at PATH. Returns the loop's wall time in seconds (an upper bound
    of the recorded steps)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    plan = schedule(wait=0, warmup=1, active=ACTIVE_STEPS)
    start = time.perf_counter()
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=plan,
        on_trace_ready=lambda prof: prof.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(1 + ACTIVE_STEPS):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            prof.step()
    return time.perf_counter() - start


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    path = tmp_path_factory.mktemp("cpu_profile") / "rank0.pt.trace.json"
    wall_s = record_cpu_trace(path)
    assert path.is_file() and path.stat().st_size > 0
    return path, wall_s


def profiler_steps_s(path: Path) -> list[float]:
    """Durations (s) of the trace's ProfilerStep#N events, in step order: what torch itself recorded."""
    events = json.loads(path.read_text())["traceEvents"]
    steps = sorted(
        (int(e["name"].split("#")[1]), e["dur"] / 1e6)
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
    )
    return [dur for _, dur in steps]


def test_a_cpu_torch_profiler_trace_gets_steps_and_no_gpu_breakdown(cpu_trace, cli):
    path, wall_s = cpu_trace
    result = cli("trace", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["kind"] == "trace" and len(doc["ranks"]) == 1
    [rank] = doc["ranks"]
    # the breakdown: a CPU-only run has no device time to split, and says so instead of inventing one
    assert rank["device"]["kind"] == "cpu" and rank["temporal_breakdown"] is None
    assert rank["kernels"]["count"] == 0 and rank["idle_by_stream"] == []
    assert any(w.startswith("no GPU activity in this trace") for w in rank["warnings"])
    assert rank["events"] > 100  # every aten op of 4 forward/backward/SGD steps
    # the steps: the four active ones, each as long as torch recorded it
    steps = rank["steps"]
    assert steps["count"] == ACTIVE_STEPS and steps["numbers"] == list(range(1, ACTIVE_STEPS + 1))
    recorded = profiler_steps_s(path)
    assert steps["step_times_s"] == pytest.approx(recorded, abs=1e-6)
    assert 0 < sum(steps["step_times_s"]) <= wall_s
    assert steps["mean_ms"] == pytest.approx(1e3 * sum(recorded) / len(recorded), abs=0.01)
    assert steps["min_ms"] <= steps["median_ms"] <= steps["max_ms"]


def test_the_terminal_view_of_a_cpu_trace_names_its_steps(cpu_trace, cli):
    result = cli("trace", str(cpu_trace[0]))
    assert result.exit_code == 0, result.stderr
    assert f"{ACTIVE_STEPS} (ProfilerStep#1–#{ACTIVE_STEPS})" in result.stdout
    assert "no GPU activity in this trace" in result.stdout
