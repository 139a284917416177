"""Telemetry with a faked NVML (no GPU here): pynvml's functions patched with unittest.mock, returning
pynvml's own structs; throttling, headroom and utilization reach the shared rules through Evidence."""

from __future__ import annotations

from typing import ClassVar
from unittest import mock

import pynvml
import pytest

from gpuwise.monitor.nvml_sample import NvmlDevice, decode_reasons
from gpuwise.profile.analysis import build_run, match_catalog_gpu
from gpuwise.profile.telemetry import TelemetrySampler, summarize
from gpuwise.units import GiB


def fake_nvml(
    util=(35, 20),
    used_gib=20.0,
    total_gib=80.0,
    power_mw=310_000,
    temp_c=86,
    clock_mhz=1215,
    reasons=(0x40,),
    power_error=None,
    name="NVIDIA A100-SXM4-80GB",
):
    """Patch pynvml so a sampler sees one GPU; ``reasons`` cycles through clock-event masks per sample."""
    masks = iter(list(reasons) * 100)
    power = mock.Mock(side_effect=power_error) if power_error else mock.Mock(return_value=power_mw)
    patches = {
        "nvmlInit": mock.Mock(return_value=None),
        "nvmlShutdown": mock.Mock(return_value=None),
        "nvmlDeviceGetHandleByIndex": mock.Mock(return_value=object()),
        "nvmlDeviceGetName": mock.Mock(return_value=name),
        "nvmlDeviceGetUtilizationRates": mock.Mock(
            return_value=pynvml.c_nvmlUtilization_t(gpu=util[0], memory=util[1])
        ),
        "nvmlDeviceGetMemoryInfo": mock.Mock(
            return_value=pynvml.c_nvmlMemory_t(
                total=int(total_gib * GiB), free=int((total_gib - used_gib) * GiB), used=int(used_gib * GiB)
            )
        ),
        "nvmlDeviceGetPowerUsage": power,
        "nvmlDeviceGetTemperature": mock.Mock(return_value=temp_c),
        "nvmlDeviceGetClockInfo": mock.Mock(return_value=clock_mhz),
        "nvmlDeviceGetCurrentClocksEventReasons": mock.Mock(side_effect=lambda h: next(masks)),
    }
    return mock.patch.multiple(pynvml, **patches)


def sampled(n: int = 10, **kwargs) -> dict:
    with fake_nvml(**kwargs):
        sampler = TelemetrySampler(interval_s=0.01, nvml_index=0)
        sampler._prime()
        for _ in range(n):
            sampler.sample_once()
        sampler.stop()
    return summarize(sampler.samples, sampler.cpu_count, sampler.not_available, sampler.interval_s)


def run_from(telemetry: dict, device: str = "cuda", gpu_name: str = "NVIDIA A100-SXM4-80GB"):
    steps = [
        {
            "wall_s": 0.1,
            "phase_s": {
                "data_wait": 0.001,
                "forward": 0.04,
                "backward": 0.05,
                "optimizer": 0.005,
                "other": 0.004,
            },
            "memory_bytes": 1e9,
        }
        for _ in range(12)
    ]
    raw = {
        "steps": steps,
        "warmup": 2,
        "device": device,
        "gpu_name": gpu_name,
        "telemetry": telemetry,
        "model": {"param_dtype": "bfloat16", "amp_enabled": True},
        "memory": {"measure": "torch.cuda.memory_allocated"},
    }
    return build_run(raw)


def ids(run) -> list[str]:
    return [f.id for f in run.findings]


def test_nvml_samples_fill_the_telemetry_summary():
    tel = sampled()
    gpu = tel["gpu"]
    assert gpu["util_pct"] == 35 and gpu["mem_util_pct"] == 20
    assert gpu["memory_used_peak_bytes"] == 20 * GiB and gpu["memory_total_bytes"] == 80 * GiB
    assert gpu["power_w_mean"] == pytest.approx(310.0)  # NVML reports milliwatts
    assert gpu["temperature_c_max"] == 86 and gpu["sm_clock_mhz_mean"] == 1215
    assert gpu["clock_reason_pct"] == {"hw_thermal_slowdown": 100.0}
    assert tel["process_cpu_pct"] is not None and tel["cpu_per_core_pct"]  # psutil, always


def test_thermal_throttling_becomes_a_finding_with_its_numbers():
    run = run_from(sampled(n=7, reasons=(0x40, 0x40, 0x0, 0x40)))  # 8 samples (7 + the final one), 6 thermal
    finding = next(f for f in run.findings if f.id == "throttling")
    assert finding.severity == "high" and "thermal" in finding.title
    assert finding.metrics["throttle_pct"]["hw_thermal_slowdown"] == pytest.approx(75.0)
    assert finding.metrics["temperature_c_max"] == 86 and finding.metrics["power_w_mean"] == pytest.approx(
        310.0
    )


def test_power_cap_is_power_throttling_and_idle_is_not_throttling():
    power = run_from(sampled(reasons=(0x4,)))
    assert "power" in next(f for f in power.findings if f.id == "throttling").title
    idle = run_from(sampled(reasons=(0x1,)))  # GPU idle: clocks drop because there is no work
    assert "throttling" not in ids(idle)


def test_headroom_rules_from_nvml_memory():
    roomy = run_from(sampled(util=(35, 20), used_gib=20))
    assert "small_batch" in ids(roomy) and "oom_risk" not in ids(roomy)
    full = run_from(sampled(util=(97, 60), used_gib=76, reasons=(0x0,)))
    assert "oom_risk" in ids(full) and "small_batch" not in ids(full)
    assert (
        full.evidence.memory.memory_capacity_bytes == 80 * GiB
        and full.evidence.memory.memory_headroom_pct == pytest.approx(5.0)
    )


def test_catalog_gpu_gives_the_tensor_core_ratio():
    assert match_catalog_gpu("NVIDIA A100-SXM4-80GB") == "a100-80gb-sxm"
    assert match_catalog_gpu("NVIDIA H100 80GB HBM3").startswith("h100")
    assert match_catalog_gpu("NVIDIA GeForce RTX 3090") != "rtx-4090"  # digits must match, not just "rtx"
    assert match_catalog_gpu("Some Unknown Accelerator") is None
    run = run_from(sampled())
    assert run.evidence.gpu == "a100-80gb-sxm" and run.evidence.precision.tensor_core_speedup > 10


def test_fp32_model_on_tensor_core_gpu_is_no_mixed_precision():
    tel = sampled(reasons=(0x0,))
    steps = [
        {"wall_s": 0.1, "phase_s": {"forward": 0.04, "backward": 0.05, "other": 0.01}, "memory_bytes": 1e9}
        for _ in range(12)
    ]
    raw = {
        "steps": steps,
        "warmup": 2,
        "device": "cuda",
        "gpu_name": "NVIDIA A100-SXM4-80GB",
        "telemetry": tel,
        "model": {"param_dtype": "float32", "amp_enabled": False},
        "memory": {},
    }
    assert "no_mixed_precision" in ids(build_run(raw))


def test_unsupported_queries_degrade_to_not_available():
    tel = sampled(power_error=pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))
    assert "nvml.power" in tel["not_available"]
    assert tel["gpu"]["power_w_mean"] is None and tel["gpu"]["util_pct"] == 35  # the rest still measured


def test_missing_nvml_library_degrades_to_not_available():
    with mock.patch.object(
        pynvml, "nvmlInit", side_effect=pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    ):
        device = NvmlDevice(0)
    assert not device.available and device.sample() == {}
    assert set(device.not_available) == set(NvmlDevice.METRICS)


def test_missing_psutil_degrades_to_not_available():
    sampler = TelemetrySampler(interval_s=0.01)
    sampler._psutil = None
    sampler.not_available["psutil"] = "psutil not importable"
    sampler._prime()
    sampler.sample_once()
    tel = summarize(sampler.samples, sampler.cpu_count, sampler.not_available, 0.01)
    assert tel["process_cpu_pct"] is None and "psutil" in tel["not_available"]
    assert run_from(tel, device="cpu", gpu_name="").evidence.context.cpu_util_pct is None


@pytest.mark.parametrize("children_files", [True, False])
def test_process_tree_and_disk_reads_match_psutil(children_files):
    """The cheap /proc readers agree with psutil's scans on a real process tree (psutil is the fallback)."""
    import os
    import subprocess
    import sys
    import time

    import psutil

    from gpuwise.profile.telemetry import descendant_pids, diskstats_read_bytes, whole_disks

    # a child that starts a grandchild, both alive while we look
    script = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        expected = set()
        for _ in range(100):  # until the grandchild exists
            expected = {p.pid for p in psutil.Process().children(recursive=True)}
            if len(expected) >= 2:
                break
            time.sleep(0.05)
        if sys.platform.startswith("linux") and children_files:
            assert set(descendant_pids(os.getpid())) == expected
        sampler = TelemetrySampler(interval_s=0.01)
        sampler._children_files = sampler._children_files and children_files
        assert {c.pid for c in sampler._find_children()} == expected
    finally:
        for proc in [*psutil.Process(child.pid).children(recursive=True), psutil.Process(child.pid)]:
            proc.kill()
        child.wait()
    counters = psutil.disk_io_counters()
    if sys.platform.startswith("linux") and counters is not None:
        assert (
            abs(diskstats_read_bytes(whole_disks()) - counters.read_bytes) <= 1 << 20
        )  # read a moment apart


def test_older_drivers_use_the_throttle_reasons_call():
    with (
        fake_nvml(),
        mock.patch.object(
            pynvml,
            "nvmlDeviceGetCurrentClocksEventReasons",
            side_effect=pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
        ),
        mock.patch.object(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", return_value=0x20 | 0x4),
    ):
        sample = NvmlDevice(0).sample()
    assert sample["clock_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert decode_reasons(0x80) == ["hw_power_brake_slowdown"]


def test_a_profiled_cpu_run_with_nvml_present_records_gpu_telemetry():
    """The recorder's sampler thread with a (faked) GPU attached, around a real CPU loop."""
    import torch

    import gpuwise

    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with fake_nvml():
        p = gpuwise.profile(steps=5, warmup=1, store=False, sample_interval_s=0.01)
        p.recorder.nvml_index = 0
        with p:
            for _ in range(6):
                model(torch.randn(4, 8)).sum().backward()
                opt.step()
    gpu = p.result.summary.telemetry.gpu
    assert gpu is not None and gpu.util_pct == 35 and gpu.temperature_c_max == 86


class FakeEvent:
    """Stands in for torch.cuda.Event: a timestamp, completed once `done` is set (the GPU caught up)."""

    clock: ClassVar[list[float]] = [0.0]
    done: ClassVar[list[bool]] = [True]
    synchronized: ClassVar[list[object]] = []

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = None

    def record(self) -> None:
        FakeEvent.clock[0] += 0.004
        self.t = FakeEvent.clock[0]

    def query(self) -> bool:
        return FakeEvent.done[0]

    def synchronize(self) -> None:
        FakeEvent.synchronized.append(self)

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.t - self.t) * 1000.0  # milliseconds, like CUDA


def test_cuda_event_timing_resolves_without_waiting(monkeypatch):
    """The CUDA-event path with a fake Event class (no GPU here): pending pairs resolve only when
    query() says the GPU is done, and finish() waits once, on the last event."""
    import torch

    from gpuwise.profile.cuda_timing import CudaPhaseTimer

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    FakeEvent.clock[0], FakeEvent.done[0], FakeEvent.synchronized[:] = 0.0, False, []
    timer = CudaPhaseTimer()
    timer.begin("forward")
    timer.end("forward", step=0)
    timer.begin("data_wait")  # host-only phases are not timed on the GPU
    timer.end("data_wait", step=0)
    timer.drain()
    assert timer.per_step == {}  # the GPU has not caught up: nothing resolved, nothing waited for
    timer.begin("backward")
    timer.end("backward", step=1)
    FakeEvent.done[0] = True
    timer.drain()
    assert timer.per_step == {0: {"forward": pytest.approx(0.004)}, 1: {"backward": pytest.approx(0.004)}}
    timer.begin("optimizer")
    timer.end("optimizer", step=1)
    FakeEvent.done[0] = False
    per_step = timer.finish()
    assert len(FakeEvent.synchronized) == 1 and per_step[1]["optimizer"] == pytest.approx(0.004)


def test_cuda_event_phase_times_give_a_gpu_idle_estimate():
    steps = [
        {
            "wall_s": 0.1,
            "phase_s": {"data_wait": 0.06, "forward": 0.015, "backward": 0.02, "other": 0.005},
            "gpu_phase_s": {"forward": 0.012, "backward": 0.018},
            "memory_bytes": 1e9,
        }
        for _ in range(12)
    ]
    run = build_run(
        {"steps": steps, "warmup": 2, "device": "cuda", "telemetry": None, "model": {}, "memory": {}}
    )
    assert run.summary.gpu_phases_s == {"backward": pytest.approx(0.018), "forward": pytest.approx(0.012)}
    assert run.evidence.activity.gpu_idle_pct == pytest.approx(70.0)
    assert "low_utilization" in ids(run) and "input_bound" in ids(run)


def test_recorder_cuda_path_with_faked_cuda(monkeypatch):
    """The recorder's CUDA branch (device detection, CUDA events, NVTX, torch.cuda memory statistics)
    driven through torch.cuda stand-ins, since no GPU exists here."""
    from types import SimpleNamespace

    import torch

    from gpuwise.profile.phases import (
        BACKWARD_IN,
        BACKWARD_OUT,
        DATA_IN,
        DATA_OUT,
        FORWARD_IN,
        FORWARD_OUT,
        OPTIMIZER_IN,
        OPTIMIZER_OUT,
    )
    from gpuwise.profile.recorder import Recorder

    nvtx = mock.Mock()
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "nvtx", nvtx)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda index=None: 2 * GiB)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda index=None: 30 * GiB)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda index=None: 25 * GiB)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index=None: SimpleNamespace(total_memory=80 * GiB)
    )
    FakeEvent.clock[0], FakeEvent.done[0], FakeEvent.synchronized[:] = 0.0, True, []

    class CudaParam:
        device = SimpleNamespace(type="cuda", index=0)
        dtype = torch.float32

        def numel(self):
            return 1000

    class OnGpu:
        def parameters(self):
            return iter([CudaParam()])

    rec = Recorder(warmup=1, telemetry=False, copies_and_syncs=False).start()
    try:
        for _ in range(10):
            rec.mark(DATA_IN)
            rec.mark(DATA_OUT)
            if not rec.device_checked:
                rec.inspect_model(
                    OnGpu()
                )  # what the forward hook does until a module with parameters shows up
            rec.mark(FORWARD_IN)
            rec.mark(FORWARD_OUT)
            rec.mark(BACKWARD_IN)
            rec.mark(BACKWARD_OUT)
            rec.mark(OPTIMIZER_IN)
            rec.mark(OPTIMIZER_OUT)
            rec.end_step()
    finally:
        raw = rec.stop()
    assert raw["device"] == "cuda" and raw["gpu_name"] == "NVIDIA A100-SXM4-80GB"
    assert raw["model"]["amp_enabled"] is False and raw["model"]["param_dtype"] == "float32"
    assert raw["memory"]["measure"] == "torch.cuda.memory_allocated"
    assert raw["memory"]["capacity_bytes"] == 80 * GiB and raw["memory"]["peak_reserved_bytes"] == 30 * GiB
    readings = [s["memory_bytes"] for s in raw["steps"] if s["memory_bytes"] is not None]
    assert readings and set(readings) == {2 * GiB}  # spaced by the probe's time budget
    assert set(raw["steps"][-1]["gpu_phase_s"]) == {"forward", "backward", "optimizer"}
    assert nvtx.range_push.call_count == nvtx.range_pop.call_count > 0  # balanced ranges
    run = build_run(raw)
    assert run.summary.gpu_phases_s["forward"] == pytest.approx(0.004)
    assert run.evidence.precision.fp32_matmul_pct == 100 and run.evidence.precision.tensor_core_speedup > 10
    assert "no_mixed_precision" in ids(run)
    assert run.evidence.memory.memory_headroom_pct == pytest.approx(62.5)


def test_telemetry_statistics_cover_the_measured_steps_only():
    """A real run: 1.5 s of busy set-up after the profiler starts, then 2 warm-up steps and 15 steps
    that mostly sleep. CPU % must describe the steps (low), not the set-up (a whole core)."""
    import time

    import torch

    import gpuwise

    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuwise.profile(warmup=2, store=False, sample_interval_s=0.1) as prof:
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end:  # set-up that burns a core: before any step
            pass
        for _ in range(17):
            model(torch.randn(4, 8)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.1)
    raw = prof.recorder.raw()
    tel = raw["telemetry"]
    assert tel["window"] == "steps"
    sampler = prof.recorder.sampler
    assert sampler is not None
    whole = summarize(sampler.samples, sampler.cpu_count, {}, 0.1)
    # the steps span ~1.5 s at 0.1 s per sample; the set-up's ~15 samples are left out
    assert 8 <= tel["samples"] < whole["samples"] - 8
    # sleeping steps use a few % of one core; the spin used a whole one (50 % of 2 cores, less under load)
    assert tel["process_cpu_pct"] < 15.0
    assert whole["process_cpu_pct"] > tel["process_cpu_pct"] + 5.0


def test_a_run_shorter_than_a_sample_keeps_every_sample():
    samples = [{"t": 10.0, "dt": 0.5, "process_cpu_pct": 40.0}]
    tel = summarize(samples, 2, {}, 0.5, window=(10.6, 10.7))
    assert tel["window"] == "run" and tel["process_cpu_pct"] == 40.0
    tel = summarize(samples, 2, {}, 0.5, window=(9.5, 10.1))
    assert tel["window"] == "steps" and tel["samples"] == 1


_WORKER_SCRIPT = """
import json, sys, time, torch
from torch.utils.data import DataLoader, Dataset
import gpuwise


class Busy(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        end = time.process_time() + 0.01  # 10 ms of CPU per item, in the worker
        while time.process_time() < end:
            pass
        return torch.randn(8), torch.randn(1)


if __name__ == "__main__":
    method = sys.argv[1]
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gpuwise.profile(warmup=1, store=False, sample_interval_s=0.05) as prof:
        for epoch in range(4):  # workers start and exit each epoch: a reaped worker must not leave a hole
            loader = DataLoader(Busy(), batch_size=4, num_workers=2, multiprocessing_context=method)
            for x, y in loader:
                (model(x) - y).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
    sampler = prof.recorder.sampler
    cpu = [s["process_cpu_pct"] for s in sampler.samples if "process_cpu_pct" in s]
    print(json.dumps({"cpu": cpu, "mean": prof.recorder.raw()["telemetry"]["process_cpu_pct"]}))
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_worker_cpu_is_counted_for_every_start_method(method, tmp_path):
    """Real DataLoader workers started by fork, spawn and forkserver (whose workers are grandchildren,
    reaped by the forkserver, not by us): every CPU sample lies in [0, 100] % of the cores, and the
    workers' busy loading shows up."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "workers.py"
    script.write_text(_WORKER_SCRIPT)
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    proc = subprocess.run(
        [sys.executable, str(script), method], capture_output=True, text=True, timeout=240, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cpu"], "no CPU samples"
    assert all(0.0 <= pct <= 100.0 for pct in out["cpu"]), out["cpu"]
    assert 0.0 < out["mean"] <= 100.0
